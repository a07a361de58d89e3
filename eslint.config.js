import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/dist-tools/**',
      '**/dist-tools.partial-*/**',
      '**/node_modules/**',
      'packages/protocol/src/gen/**',
      '**/*.d.ts',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Functions longer than this are split; a declarative table (routes, commands, RPC handlers)
    // says so where it is exempt.
    files: ['packages/*/src/**/*.ts', 'packages/*/src/**/*.tsx'],
    rules: {
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
      'max-lines': ['error', { max: 500 }],
    },
  },
  {
    // The services run bundled (scripts/bundle-services.ts), where a path relative to the module
    // that wrote it points elsewhere. The CLI's own single-file bundle sets what it reads so.
    files: ['packages/*/src/**/*.ts', 'packages/*/src/**/*.tsx'],
    ignores: ['packages/cli/**', 'packages/test-support/**'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector:
            'NewExpression[callee.name="URL"] > MemberExpression[object.type="MetaProperty"][property.name="url"]',
          message:
            "a path relative to import.meta.url breaks in the bundle: use packageDir(name, import.meta.url) from '@agentenv/common'",
        },
      ],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
);
