// The scheduler's public surface: its client, error mapping and the domain types callers see.
export {
  createSchedulerClient,
  schedulerUrls,
  type SchedulerClient,
  type SchedulerClientOptions,
} from './client.js';
export { fromConnectError, RETRY_AFTER_HEADER, type SchedulerCallError } from './rpc/errors.js';
export type * from './model.js';
