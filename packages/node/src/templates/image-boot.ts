import { invalid } from '@agentenv/common';
import { ENVD_PORT } from '@agentenv/protocol';
import { envdInitArgs, ensureToolsLayer, loadToolsBundle, TOOLS_SANDBOX_PATH } from '../envd/index.js';
import {
  envRecord,
  imagePasswd,
  userName,
  type Credentials,
  type ImageStore,
  type PulledImage,
} from '@agentenv/oci';
import type { BootSpec, ResolvedTemplate } from '../orchestrator/index.js';
import { ensureSandboxLayer } from './sandbox-layer.js';

/** Sandbox defaults an image's config carries (envd /init). */
export type SandboxDefaults = NonNullable<ResolvedTemplate['sandboxDefaults']>;

export interface BootableImage {
  readonly image: PulledImage;
  readonly boot: BootSpec;
  readonly defaults: SandboxDefaults;
}

/**
 * The kernel takes mount options of at most one page; the layer paths of a deep image joined as
 * overlayfs `lowerdir=` must fit (the driver mounts the image layers read-only in one overlay).
 */
const MOUNT_OPTIONS_LIMIT = 4095;

/**
 * Turns an image reference into something a sandbox boots from: pulled (on demand, layers shared
 * with every other image), the glue layer on top (mount points, resolver files), envd as init from
 * the read-only tools mount, and the image's USER, WORKDIR and ENV as envd's defaults.
 */
export class ImageBoot {
  constructor(private readonly opts: { images: ImageStore; toolsDir: string }) {}

  async prepare(
    reference: string,
    opts: { credentials?: Credentials; pinAs?: string; log?: (line: string) => void } = {},
  ): Promise<BootableImage> {
    const { images } = this.opts;
    const image = await images.pull(reference, {
      ...(opts.credentials ? { credentials: opts.credentials } : {}),
      ...(opts.pinAs ? { pinAs: opts.pinAs } : {}),
      onRetry: ({ attempt, reason }) =>
        opts.log?.(`retrying the pull of ${reference} (${attempt}): ${reason}`),
    });
    opts.log?.(
      `pulled ${image.reference} (${image.digest.slice(0, 19)}): ${image.layers.length} layers, ` +
        `${image.downloadedBytes} of ${image.compressedBytes} bytes downloaded`,
    );
    const tools = await loadToolsBundle(this.opts.toolsDir);
    const [glue, toolsRoot] = await Promise.all([
      ensureSandboxLayer(images.layers),
      ensureToolsLayer(images.layers, tools),
    ]);
    const layers = [...image.layers, glue];
    const lowerdir = `ro,lowerdir=${layers.join(':')}`.length;
    if (lowerdir > MOUNT_OPTIONS_LIMIT)
      throw invalid(
        `image ${image.reference} has ${image.layers.length} layers: their overlay mount option would be ` +
          `${lowerdir} bytes, over the kernel's ${MOUNT_OPTIONS_LIMIT}; squash the image to fewer layers`,
      );
    const user = userName(image.config.user, await imagePasswd(image.layers));
    return {
      image,
      boot: {
        layers,
        mounts: [{ hostPath: toolsRoot, sandboxPath: TOOLS_SANDBOX_PATH }],
        init: { args: envdInitArgs(tools, ENVD_PORT) },
        envdPort: ENVD_PORT,
      },
      defaults: {
        user,
        envVars: envRecord(image.config.env),
        ...(image.config.workingDir ? { workdir: image.config.workingDir } : {}),
      },
    };
  }
}
