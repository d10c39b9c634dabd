/**
 * The errors the client throws, one class per thing that can go wrong, each with a `code` to
 * switch on. None of them is thrown after money may have moved without the action being saved:
 * a request is refused before anything is saved, a failed save stops the action before anything
 * is sent, and a token that cannot be had leaves the saved action for a later resume.
 */

/** The request was refused before anything was saved or sent. */
export class InvalidRequestError extends Error {
  override readonly name = 'InvalidRequestError';
  readonly code = 'invalid_request';

  constructor(
    /** What was wrong: `amount_paise`, `bill_id`, `payment_id`, `payer_vpa` or `saved_action`. */
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/** A store could not save, list or remove actions. */
export class StoreError extends Error {
  override readonly name = 'StoreError';
  readonly code = 'store_failed';

  constructor(
    readonly operation: 'save' | 'list' | 'remove',
    message: string,
    /** The storage's own error, when there was one. */
    readonly cause?: unknown,
  ) {
    super(message);
  }
}

/** The new action could not be saved, so nothing was sent: nothing can have been charged. */
export class SaveFailedError extends Error {
  override readonly name = 'SaveFailedError';
  readonly code = 'save_failed';

  constructor(
    /** The key the action would have had. */
    readonly key: string,
    readonly cause: unknown,
  ) {
    super(`the action could not be saved, so it was not sent: ${describe(cause)}`);
  }
}

/**
 * The token could not be had for a request. The action stays saved (earlier attempts may have
 * paid): sign in again and resume it.
 */
export class TokenUnavailableError extends Error {
  override readonly name = 'TokenUnavailableError';
  readonly code = 'token_unavailable';

  constructor(
    readonly key: string,
    readonly cause: unknown,
  ) {
    super(`no token for the action's next request: ${describe(cause)}`);
  }
}

/** An error's message, or the thing itself as text. */
export function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
