import { describe, expect, it } from 'vitest';
import { DEFAULT_TEMPLATE } from '@agentenv/common';
import { createHint } from '../../src/handlers/create.js';

describe('the placement hint of a create', () => {
  it('names the template, or the default one, and no size the create cannot carry', () => {
    expect(createHint({ templateID: 'py', memoryMB: 4096, cpuCount: 4 }, false)).toEqual({
      templateId: 'py',
    });
    expect(createHint({}, false)).toEqual({ templateId: DEFAULT_TEMPLATE });
  });

  it("takes a cold create's image and size, memory in the scheduler's MiB", () => {
    expect(createHint({ image: 'python:3.12', cpuCount: 2, memoryMB: 1024 }, true)).toEqual({
      templateId: 'python:3.12',
      cpuCount: 2,
      memoryMib: 1024,
    });
  });
});
