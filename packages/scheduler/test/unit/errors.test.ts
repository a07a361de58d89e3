import { Code, ConnectError } from '@connectrpc/connect';
import { describe, expect, it } from 'vitest';
import { DomainError } from '@agentenv/common';
import { fromConnectError, toConnectError } from '../../src/rpc/errors.js';

describe('error mapping', () => {
  it('maps every kind to one Connect code', () => {
    const cases: [DomainError['kind'], Code][] = [
      ['capacity', Code.ResourceExhausted],
      ['unavailable', Code.Unavailable],
      ['not_found', Code.NotFound],
      ['invalid', Code.InvalidArgument],
      ['unauthorized', Code.Unauthenticated],
      ['conflict', Code.FailedPrecondition],
      ['internal', Code.Internal],
    ];
    for (const [kind, code] of cases) expect(toConnectError(new DomainError(kind, 'm')).code).toBe(code);
  });

  it('carries retry-after for capacity and reads it back', () => {
    const ce = toConnectError(new DomainError('capacity', 'cluster full', 3));
    expect(ce.metadata.get('retry-after')).toBe('3');
    expect(fromConnectError(ce)).toEqual({
      kind: 'capacity',
      message: 'cluster full',
      retryAfter: 3,
      reached: true,
    });
  });

  it('hides unexpected errors and treats transport failures as unavailable', () => {
    const ce = toConnectError(new Error('secret detail'));
    expect(ce.code).toBe(Code.Internal);
    expect(ce.rawMessage).toBe('internal error');
    expect(fromConnectError(new ConnectError('socket hang up', Code.Unknown)).kind).toBe('unavailable');
  });
});
