// Preloaded (--import) into SDK client processes: names under the test domain resolve to the
// loopback address the test's edge server listens on, as a wildcard DNS record would.
import dns from 'node:dns';

const domain = process.env.AENV_TEST_DOMAIN;
const address = process.env.AENV_TEST_DOMAIN_ADDRESS;
const lookup = dns.lookup;
dns.lookup = (host, opts, cb) => {
  if (typeof opts === 'function') [cb, opts] = [opts, {}];
  if (domain && (host === domain || host.endsWith(`.${domain}`))) {
    const all = typeof opts === 'object' && opts?.all;
    return all ? cb(null, [{ address, family: 4 }]) : cb(null, address, 4);
  }
  return lookup(host, opts, cb);
};
