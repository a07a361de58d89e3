import { randomBytes } from 'node:crypto';
import type { Credentials } from '../image/oci/index.js';
import type { ResolvedTemplate, TemplateCatalog } from '../orchestrator/seams.js';
import type { Resources } from '../runtime/driver.js';
import type { ImageBoot } from './image-boot.js';

export interface ColdRequest {
  readonly image: string;
  readonly resources: Resources;
  readonly credentials?: Credentials;
}

/**
 * Sandboxes straight from an image (POST /sandboxes-cold): the route stages a request under a
 * one-time id, creates a sandbox with that id as its template, and unstages it; resolving the id
 * pulls the image (layers cached and shared) and boots it instead of restoring a ready state.
 * Other ids go to `next`.
 */
export class ColdImages implements TemplateCatalog {
  private readonly staged = new Map<string, ColdRequest>();

  constructor(private readonly d: { images: ImageBoot; envdVersion: string; next: TemplateCatalog }) {}

  stage(req: ColdRequest): string {
    const id = `cold-${randomBytes(16).toString('hex')}`;
    this.staged.set(id, req);
    return id;
  }

  unstage(id: string): void {
    this.staged.delete(id);
  }

  async resolve(id: string): Promise<ResolvedTemplate> {
    const req = this.staged.get(id);
    if (!req) return this.d.next.resolve(id);
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
