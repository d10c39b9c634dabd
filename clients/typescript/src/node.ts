/**
 * `payments-client/node`: everything `payments-client` exports, plus {@link FileStore}, the
 * durable store for Node (one JSON file per action, written atomically and fsynced). Kept apart
 * so that browser and React Native bundles never import `node:fs`.
 */

export * from './index.js';
export { FileStore } from './fileStore.js';
