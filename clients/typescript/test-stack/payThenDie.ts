/**
 * A phone killed between saving an action and sending it: it starts a payment with the file
 * store, and its `fetch` ends the process (exit code 9) at the first send, so the action is saved
 * and nothing left the phone. `stack.test.ts` then resumes the action from a new process.
 */

import { FileStore, PaymentsClient } from '../src/node.js';
import { setting, signToken } from '../dev/environment.js';

const user = setting('PAY_USER');
const client = new PaymentsClient({
  baseUrl: setting('PAY_URL'),
  token: signToken(user),
  userId: user,
  store: new FileStore(setting('STORE_DIR')),
  fetch: () => process.exit(9),
});
await client.payBill('elec-killed', 230000, 'asha@okbank');
process.exit(1); // Never reached: the first send ends the process.
