/**
 * A pay-a-bill page on `payments-client`: one tap on Pay is one action with one
 * `Idempotency-Key`, saved in `localStorage` before its first send. On load the page lists the
 * actions a reload or a closed tab left and resumes them (same key, same body bytes), so a
 * reload in the middle of a payment carries the payment on and never starts a new one.
 *
 * The token comes from the URL fragment (`#token=<jwt>&user=<id>`, which never reaches a
 * server), is kept in `sessionStorage` so that a reload keeps it, and is then taken out of the
 * address bar. Bundled by esbuild into `web/dist/app.js` (`npm run build:web`).
 */

import {
  type ActionResult,
  type ClientEvent,
  InvalidRequestError,
  type KnownBy,
  PaymentsClient,
  type Payment,
  type Problem,
  type Refund,
  type SavedAction,
  SaveFailedError,
  TokenUnavailableError,
  type Unsettled,
  WebStorageStore,
} from '../src/index.js';

const TOKEN_ITEM = 'pay-page/token';
const USER_ITEM = 'pay-page/user';

/** The element with `id`, which the page must have. */
function byId<T extends HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (element === null) {
    throw new Error(`the page has no #${id}`);
  }
  return element as T;
}

const view = {
  who: byId('who'),
  noToken: byId('no-token'),
  form: byId<HTMLFormElement>('pay-form'),
  bill: byId<HTMLInputElement>('bill'),
  amount: byId<HTMLInputElement>('amount'),
  amountHint: byId('amount-hint'),
  vpa: byId<HTMLInputElement>('vpa'),
  pay: byId<HTMLButtonElement>('pay'),
  savedPanel: byId('saved-panel'),
  saved: byId('saved'),
  actionPanel: byId('action-panel'),
  actionKey: byId('action-key'),
  attempts: byId('attempts'),
  result: byId('result'),
};

/** A small element builder: text children are text nodes, never markup. */
function h(
  tag: string,
  attributes: Record<string, string> = {},
  ...children: (Node | string)[]
): HTMLElement {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    element.setAttribute(name, value);
  }
  element.append(...children);
  return element;
}

// --- Sign-in: the fragment, then sessionStorage -------------------------------------------

interface Session {
  readonly token: string;
  readonly userId: string;
}

function readSession(): Session | null {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const token = fragment.get('token');
  const user = fragment.get('user');
  if (token !== null && token !== '' && user !== null && user !== '') {
    sessionStorage.setItem(TOKEN_ITEM, token);
    sessionStorage.setItem(USER_ITEM, user);
  }
  if (fragment.has('token')) {
    // Out of the address bar and the history; a reload reads sessionStorage instead.
    history.replaceState(null, '', location.pathname + location.search);
  }
  const saved = sessionStorage.getItem(TOKEN_ITEM);
  const userId = sessionStorage.getItem(USER_ITEM);
  return saved !== null && userId !== null ? { token: saved, userId } : null;
}

// --- Amounts: rupees shown, paise sent ----------------------------------------------------

/** Rupees with at most two decimals (`2300`, `2,300.5`, `2300.00`) as whole paise, or `null`. */
function paiseOf(text: string): number | null {
  const parts = /^\s*([0-9]{1,10})(?:\.([0-9]{1,2}))?\s*$/.exec(text.replace(/,/g, ''));
  if (parts === null) {
    return null;
  }
  return Number(parts[1]) * 100 + Number((parts[2] ?? '').padEnd(2, '0'));
}

function rupees(paise: number): string {
  return `₹${(paise / 100).toLocaleString('en-IN', {
    minimumFractionDigits: 2,
    maximumFractionDigits: 2,
  })}`;
}

// --- The running action: its key, its attempts, its outcome -------------------------------

let shownKey: string | null = null;
let shownSince = 0;
let busy = false;

function setBusy(running: boolean): void {
  busy = running;
  updatePayButton();
}

function updatePayButton(): void {
  view.pay.disabled = busy || session === null || paiseOf(view.amount.value) === null;
  for (const button of view.result.querySelectorAll('button')) {
    button.disabled = busy;
  }
}

/** Starts showing action `key` (or no action, for an error before one was saved). */
function showAction(key: string | null): void {
  shownKey = key;
  shownSince = performance.now();
  view.actionPanel.hidden = false;
  view.actionKey.textContent = key ?? '(none: nothing was saved or sent)';
  view.attempts.replaceChildren();
  setResult('running', h('p', {}, 'Working…'));
}

function setResult(kind: string, ...content: HTMLElement[]): void {
  view.result.dataset['kind'] = kind;
  view.result.replaceChildren(...content);
}

function onEvent(event: ClientEvent): void {
  if (event.key !== shownKey) {
    showAction(event.key);
  }
  const seconds = ((performance.now() - shownSince) / 1000).toFixed(1);
  view.attempts.append(
    h(
      'li',
      event.type === 'replied'
        ? { 'data-event': event.type, 'data-status': String(event.status) }
        : { 'data-event': event.type },
      h('span', { class: 'at' }, `+${seconds} s`),
      ' ',
      line(event),
    ),
  );
}

/** One event as a line of the attempts list. */
function line(event: ClientEvent): string {
  switch (event.type) {
    case 'resuming':
      return `Resuming the saved payment (started ${ago(event.elapsedMs)})`;
    case 'sending': {
      const wait =
        event.preferWaitSeconds === null ? '' : ` (Prefer: wait=${event.preferWaitSeconds})`;
      return `Sending attempt ${event.attempt}${wait}`;
    }
    case 'replied': {
      const replayed = event.replayed ? ', replayed' : '';
      const waited =
        event.waitedSeconds === null
          ? ''
          : `, held for the first attempt (Preference-Applied: wait=${event.waitedSeconds})`;
      return `Attempt ${event.attempt} replied ${event.status}${replayed}${waited}`;
    }
    case 'no_reply':
      return `Attempt ${event.attempt}: no reply (${event.reason})`;
    case 'waiting': {
      const floor =
        event.retryAfterMs === null ? '' : ` (Retry-After: ${event.retryAfterMs / 1000} s)`;
      return `Waiting ${Math.round(event.ms)} ms${floor}`;
    }
    case 'stopped_sending':
      return event.attempts === 0
        ? 'Past the deadline: asking the server for the outcome, never paying again'
        : `No more attempts after ${event.attempts}: asking the server for the outcome`;
    case 'looking_up':
      return `Looking up the key's outcome (check ${event.check})`;
    case 'look_up_failed':
      return `Check ${event.check} told nothing (${event.reason})`;
    case 'stopped':
      return `Stopped: ${event.result}${event.keptAction ? ' (kept in this browser)' : ''}`;
    case 'forget_failed':
      return `Could not remove the finished payment from this browser: ${event.reason}`;
  }
}

function ago(ms: number): string {
  const seconds = ms / 1000;
  if (seconds < 60) {
    return `${seconds.toFixed(1)} s ago`;
  }
  const minutes = Math.floor(seconds / 60);
  return minutes < 120 ? `${minutes} min ago` : `${Math.floor(minutes / 60)} h ago`;
}

/** "We will know by …" when the server named a time (SPEC §4), in the browser's local time. */
function knownByLine(knownBy: KnownBy | null): HTMLElement[] {
  if (knownBy === null) {
    return [];
  }
  const at = new Date(knownBy.at).toLocaleString();
  const text =
    knownBy.kind === 'settlement'
      ? `The bank's settlement file, due ${at}, will say; we will know by then.`
      : `The bank will be asked again at ${at}; we will know soon after.`;
  return [h('p', { class: 'known-by' }, text)];
}

const WHY: Record<Unsettled, string> = {
  started: 'the first attempt is still running on the server',
  unknown: "the bank's reply is not known yet; the server is asking the bank",
  unreachable: 'the server could not be reached',
  released: 'the bank never received it; asking again sends it once more under the same key',
};

function details(rows: [string, string][]): HTMLElement {
  return h('dl', {}, ...rows.flatMap(([name, value]) => [h('dt', {}, name), h('dd', {}, value)]));
}

function problemLines(problem: Problem | null, fallback: string): HTMLElement[] {
  if (problem === null) {
    return [h('p', {}, fallback)];
  }
  const lines = [h('p', {}, h('strong', {}, problem.title))];
  if (problem.detail !== undefined) {
    lines.push(h('p', {}, problem.detail));
  }
  lines.push(details([['Problem', problem.type]]));
  return lines;
}

function showResult(result: ActionResult): void {
  if (result.key !== shownKey) {
    showAction(result.key);
  }
  switch (result.kind) {
    case 'paid': {
      const receipt = result.receipt as Payment | Refund;
      const rows: [string, string][] =
        'refund_id' in receipt
          ? [['Refund id', receipt.refund_id]]
          : [
              ['Payment id', receipt.payment_id],
              ['Bill', receipt.bill_id],
            ];
      rows.push(
        ['Bank reference', receipt.bank_reference],
        ['Amount', rupees(receipt.amount_paise)],
        ['Reply', `${result.status}${result.replayed ? ' (the saved reply, replayed)' : ''}`],
      );
      setResult('paid', h('h3', {}, 'Paid'), details(rows));
      return;
    }
    case 'declined':
      setResult(
        'declined',
        h('h3', {}, 'Declined by the bank'),
        ...problemLines(result.problem, 'Nothing was charged.'),
      );
      return;
    case 'refused':
      setResult(
        'refused',
        h('h3', {}, `Refused (${result.status})`),
        ...problemLines(result.problem, result.bodyText.slice(0, 200)),
      );
      return;
    case 'unreadable':
      setResult(
        'unreadable',
        h('h3', {}, `Replied ${result.status}, but not with a payment`),
        h(
          'p',
          {},
          'Something between here and the server replied. Check your payments before paying ' +
            'again.',
        ),
      );
      return;
    case 'pending': {
      const again = h('button', { type: 'button', class: 'quiet' }, 'Ask again');
      again.addEventListener('click', () => void resumeSaved());
      setResult(
        'pending',
        h('h3', {}, 'Not settled yet'),
        h('p', {}, `The outcome is not known: ${WHY[result.why]}.`),
        ...knownByLine(result.knownBy),
        h(
          'p',
          {},
          'The payment is kept in this browser and will never be paid twice. Ask later with key ',
          h('span', { class: 'key' }, result.key),
          '.',
        ),
        again,
      );
      updatePayButton();
      return;
    }
    case 'sign_in_required':
      setResult(
        'sign_in_required',
        h('h3', {}, 'Sign in again'),
        h(
          'p',
          {},
          'The token was refused. The payment is kept in this browser: open the page with a new ' +
            'token and it carries on with the same key.',
        ),
      );
      return;
    case 'not_received':
      setResult(
        'not_received',
        h('h3', {}, 'Not received'),
        h(
          'p',
          {},
          'The server never received this payment: nothing was charged. You can pay again.',
        ),
      );
  }
}

function showError(error: unknown): void {
  // Only a token error comes after the action was saved: its attempts stay in view.
  const key = error instanceof TokenUnavailableError ? error.key : null;
  if (key === null || key !== shownKey) {
    showAction(key);
  }
  const message = error instanceof Error ? error.message : String(error);
  const what =
    error instanceof InvalidRequestError
      ? 'Check the form'
      : error instanceof SaveFailedError
        ? 'Could not save the payment in this browser, so it was not sent'
        : error instanceof TokenUnavailableError
          ? 'No token for the next request: the payment is kept; sign in again to carry it on'
          : 'Something went wrong';
  setResult('error', h('h3', {}, what), h('p', {}, message));
}

// --- Saved actions: listed and resumed on load ---------------------------------------------

function describeSaved(action: SavedAction): HTMLElement {
  let amount = '';
  try {
    const body = JSON.parse(action.body) as { amount_paise?: unknown };
    if (typeof body.amount_paise === 'number') {
      amount = ` · ${rupees(body.amount_paise)}`;
    }
  } catch {
    // The body is sent as saved; it only fails to show here.
  }
  const what =
    action.operation === 'pay_bill' ? `Bill ${action.target}` : `Refund of ${action.target}`;
  const since = new Date(action.startedAtMs).toLocaleTimeString();
  return h(
    'li',
    {},
    `${what}${amount} · started ${since} · key `,
    h('span', { class: 'key' }, action.key),
  );
}

function listSaved(actions: SavedAction[]): void {
  view.saved.replaceChildren(...actions.map(describeSaved));
  if (actions.length === 0 && !view.savedPanel.hidden) {
    view.saved.append(h('li', {}, 'None left: every saved payment has a reply.'));
  }
  if (actions.length > 0) {
    view.savedPanel.hidden = false;
  }
}

/** Carries on with every saved action of this user, oldest first, showing each. */
async function resumeSaved(): Promise<void> {
  if (client === null || busy) {
    return;
  }
  setBusy(true);
  try {
    const saved = await client.pending();
    listSaved(saved);
    for (const action of saved) {
      try {
        showResult(await client.resume(action));
      } catch (error) {
        showError(error);
      }
    }
    listSaved(await client.pending());
  } catch (error) {
    showError(error);
  } finally {
    setBusy(false);
  }
}

async function pay(): Promise<void> {
  if (client === null || busy) {
    return;
  }
  const amountPaise = paiseOf(view.amount.value);
  if (amountPaise === null) {
    return;
  }
  setBusy(true);
  shownKey = null;
  const bill = view.bill.value.trim();
  try {
    // A bill whose earlier payment is not settled yet is not paid again under a new key (that
    // could charge twice): the earlier payment is asked about, under its own key, instead.
    const earlier = (await client.pending()).find(
      (saved) => saved.operation === 'pay_bill' && saved.target === bill,
    );
    showResult(
      earlier === undefined
        ? await client.payBill(bill, amountPaise, view.vpa.value.trim())
        : await client.resume(earlier),
    );
  } catch (error) {
    showError(error);
  } finally {
    setBusy(false);
  }
}

// --- Start ---------------------------------------------------------------------------------

function showAmountHint(): void {
  const paise = paiseOf(view.amount.value);
  view.amountHint.textContent =
    paise === null
      ? 'Rupees, with up to two decimals (e.g. 2300.00)'
      : `${rupees(paise)}: ${paise} paise are sent`;
  updatePayButton();
}

const session = readSession();
const client =
  session === null
    ? null
    : new PaymentsClient({
        baseUrl: location.origin,
        // Asked before every request, so a token given in a new fragment is used at once.
        token: () => sessionStorage.getItem(TOKEN_ITEM) ?? session.token,
        userId: session.userId,
        store: new WebStorageStore(localStorage),
        onEvent,
      });

// A new sign-in fragment in the same tab: start again with it (a run in progress is saved and
// resumes on load, like after any reload).
window.addEventListener('hashchange', () => {
  if (new URLSearchParams(location.hash.slice(1)).has('token')) {
    location.reload();
  }
});
view.amount.addEventListener('input', showAmountHint);
view.form.addEventListener('submit', (event) => {
  event.preventDefault();
  void pay();
});
showAmountHint();

if (session === null) {
  view.noToken.hidden = false;
  view.who.textContent = 'Not signed in';
} else {
  view.who.textContent = `Signed in as user ${session.userId}`;
  void resumeSaved();
}
