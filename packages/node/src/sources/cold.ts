import type { ResolvedTemplate, SandboxSource } from '../orchestrator/index.js';
import type { ImageBoot } from '../templates/index.js';
import type { ImageSource } from './chain.js';

/**
 * Sandboxes straight from an image (POST /sandboxes-cold): the image is pulled (layers cached and
 * shared) and booted instead of restoring a captured ready state.
 */
export class ColdImages implements ImageSource {
  constructor(private readonly d: { images: ImageBoot; envdVersion: string }) {}

  async resolve(req: Extract<SandboxSource, { kind: 'image' }>): Promise<ResolvedTemplate> {
    const b = await this.d.images.prepare(req.image, {
      ...(req.credentials ? { credentials: req.credentials } : {}),
      pinAs: `image:${req.image}`,
    });
    return {
      templateId: b.image.reference,
      boot: b.boot,
      defaults: req.resources,
      envdVersion: this.d.envdVersion,
      sandboxDefaults: b.defaults,
    };
  }
}
