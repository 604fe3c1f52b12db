// ESLint flat config: typescript-eslint's type-checked rules for the extension's sources.
import eslint from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['out/', 'node_modules/', '*.vsix'] },
  {
    files: ['src/**/*.ts'],
    extends: [eslint.configs.recommended, tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      eqeqeq: 'error',
      curly: 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/explicit-function-return-type': ['error', { allowExpressions: true }],
    },
  },
  {
    files: ['eslint.config.mjs'],
    extends: [eslint.configs.recommended],
  },
  {
    // The stand-in kvlint the tests run: a Node script.
    files: ['test-fixtures/**/*.js'],
    extends: [eslint.configs.recommended],
    languageOptions: {
      sourceType: 'commonjs',
      globals: { Buffer: 'readonly', console: 'readonly', process: 'readonly', require: 'readonly' },
    },
    rules: { eqeqeq: 'error', curly: 'error' },
  },
);
