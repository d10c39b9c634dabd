/**
 * `payments-client`: a payments client that follows the idempotency rules of SPEC §6, for
 * browsers, React Native and Node. One tap on Pay is one action with one key: the key is minted
 * and the body frozen and saved *before* the first send, every retry sends the identical bytes
 * under the same key, and after the deadline the client asks the server for the outcome instead
 * of paying again. The rules are a port of `shared::retry`, held to the Rust rules by the test
 * vectors in `shared/vectors/client-rules.json`.
 *
 * This entry point is browser-safe; `payments-client/node` adds the file store.
 */

export { PaymentsClient, MAX_AMOUNT_PAISE, type PaymentsClientOptions } from './client.js';
export { systemClock, type Clock } from './clock.js';
export {
  InvalidRequestError,
  SaveFailedError,
  StoreError,
  TokenUnavailableError,
} from './errors.js';
export type { ClientEvent, EventListener } from './events.js';
export type { FetchLike, RequestInitLike, ResponseLike, TokenSource } from './http.js';
export {
  keyStateFromBody,
  knownByOf,
  readKeyStatus,
  type KeyState,
  type KeyStatus,
  type KnownBy,
} from './keyState.js';
export {
  AsyncStorageStore,
  DEFAULT_PREFIX,
  WebStorageStore,
  type AsyncStorageLike,
  type WebStorageLike,
} from './keyValueStores.js';
export {
  ActionProgress,
  keepsAction,
  type Ending,
  type Next,
  type PreferHeaders,
  type Seen,
  type Unsettled,
} from './progress.js';
export type {
  ActionResult,
  Declined,
  NotReceived,
  Operation,
  Paid,
  Payment,
  Pending,
  Problem,
  Receipt,
  Refund,
  Refused,
  SignInRequired,
  Unreadable,
} from './results.js';
export { LONGEST_RETRY_AFTER_SECONDS, parseRetryAfter } from './retryAfter.js';
export {
  PREFER_WAIT_MARGIN_MS,
  ceiling,
  classifyStatus,
  clientRules,
  defaultPreferWait,
  waitToAsk,
  type ReplyClass,
  type ClientRules,
} from './rules.js';
export { MemoryStore, type ActionStore, type SavedAction } from './store.js';
