import { Type } from 'typebox';

const StringMap = Type.Record(Type.String(), Type.String());
const Cidrs = Type.Array(Type.String({ maxLength: 64 }), { maxItems: 1000 });

export const NetworkBody = Type.Object(
  {
    allowOut: Type.Optional(Cidrs),
    denyOut: Type.Optional(Cidrs),
    allowPublicTraffic: Type.Optional(Type.Boolean()),
    /** The Host the sandbox's servers see (`${PORT}` is filled in): printable, no spaces. */
    maskRequestHost: Type.Optional(
      Type.String({ minLength: 1, maxLength: 512, pattern: '^[\\x21-\\x7e]+$' }),
    ),
  },
  { additionalProperties: true },
);

/** POST /sandboxes and /v2/sandboxes. Unknown fields are accepted: newer SDKs send more. */
export const CreateSandboxBody = Type.Object(
  {
    templateID: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    timeout: Type.Optional(Type.Integer({ minimum: 1, maximum: 2_592_000 })),
    metadata: Type.Optional(StringMap),
    envVars: Type.Optional(StringMap),
    autoPause: Type.Optional(Type.Boolean()),
    autoPauseMemory: Type.Optional(Type.Boolean()),
    autoResume: Type.Optional(Type.Object({ enabled: Type.Boolean() }, { additionalProperties: true })),
    secure: Type.Optional(Type.Boolean()),
    allow_internet_access: Type.Optional(Type.Boolean()),
    network: Type.Optional(NetworkBody),
    volumeMounts: Type.Optional(
      Type.Array(
        Type.Object({ name: Type.String({ maxLength: 256 }), path: Type.String({ maxLength: 4096 }) }),
        {
          maxItems: 64,
        },
      ),
    ),
  },
  { additionalProperties: true },
);

export const TimeoutBody = Type.Object({ timeout: Type.Integer({ minimum: 0, maximum: 2_592_000 }) });
/**
 * connect/resume; `memory: false` resumes a paused sandbox by a cold boot (SDK onResume 'reboot').
 * Connect takes a timeout of 0 as E2B does (a running sandbox keeps its end time, a paused one
 * resumes already expired); resume refuses it.
 */
export const OptionalTimeoutBody = Type.Object(
  {
    timeout: Type.Optional(Type.Integer({ minimum: 0, maximum: 2_592_000 })),
    memory: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: true },
);
/** POST /sandboxes/{id}/pause; `memory: false` keeps the filesystem only. The body is optional. */
export const PauseBody = Type.Union([
  Type.Object({ memory: Type.Optional(Type.Boolean()) }, { additionalProperties: true }),
  Type.Null(),
]);
/** `wait=stored` (a pause, a snapshot): answer once the shared repository holds it, not only this node. */
export const WaitQuery = Type.Object({ wait: Type.Optional(Type.Literal('stored')) });
export const RefreshBody = Type.Object({
  duration: Type.Optional(Type.Integer({ minimum: 0, maximum: 3600 })),
});
export const NetworkUpdateBody = Type.Object(
  {
    allowOut: Type.Optional(Cidrs),
    denyOut: Type.Optional(Cidrs),
    allow_internet_access: Type.Optional(Type.Boolean()),
    // E2B's egress proxy and its per-domain rules: taken here only to be refused by name.
    egressProxy: Type.Optional(Type.Unknown()),
    rules: Type.Optional(Type.Unknown()),
  },
  { additionalProperties: false },
);

export const SandboxParams = Type.Object({ sandboxID: Type.String({ pattern: '^[a-z0-9]{1,64}$' }) });

/** GET /v2/sandboxes; values are checked by parseListQuery (api/sandbox-query.ts). */
export const ListQuery = Type.Object({
  state: Type.Optional(Type.String({ maxLength: 64 })),
  metadata: Type.Optional(Type.String({ maxLength: 4096 })),
  template: Type.Optional(Type.String({ maxLength: 256 })),
  startedAfter: Type.Optional(Type.String({ maxLength: 64 })),
  order: Type.Optional(Type.String({ maxLength: 8 })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
  nextToken: Type.Optional(Type.String({ maxLength: 512 })),
});

export const LegacyListQuery = Type.Object({ metadata: Type.Optional(Type.String({ maxLength: 4096 })) });

export const ManyMetricsQuery = Type.Object({
  sandbox_ids: Type.String({ minLength: 1, maxLength: 8192 }),
});

export const LogsQuery = Type.Object({
  start: Type.Optional(Type.Integer({ minimum: 0 })),
  limit: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
});

export const LogsV2Query = Type.Object({
  cursor: Type.Optional(Type.Integer({ minimum: 0 })),
  limit: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
  direction: Type.Optional(Type.Union([Type.Literal('forward'), Type.Literal('backward')])),
  level: Type.Optional(
    Type.Union([Type.Literal('debug'), Type.Literal('info'), Type.Literal('warn'), Type.Literal('error')]),
  ),
  search: Type.Optional(Type.String({ maxLength: 256 })),
});

export const MetricsQuery = Type.Object({
  start: Type.Optional(Type.Integer({ minimum: 0 })),
  end: Type.Optional(Type.Integer({ minimum: 0 })),
});

/** AgentENV's POST /sandboxes-cold (AGENTENV-API.md §1): a create's settings and the image it boots. */
export const ColdCreateBody = Type.Object(
  {
    ...CreateSandboxBody.properties,
    image: Type.String({ minLength: 1, maxLength: 512 }),
    cpuCount: Type.Optional(Type.Integer({ minimum: 1, maximum: 64 })),
    memoryMB: Type.Optional(Type.Integer({ minimum: 128, maximum: 262_144 })),
    diskSizeMB: Type.Optional(Type.Integer({ minimum: 1024, maximum: 1_048_576, multipleOf: 1024 })),
    allowInternetAccess: Type.Optional(Type.Boolean()),
    attachedDrives: Type.Optional(Type.Array(Type.Unknown(), { maxItems: 0 })),
    registryAuth: Type.Optional(Type.Object({ username: Type.String(), password: Type.String() })),
  },
  { additionalProperties: true },
);
