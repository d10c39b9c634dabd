//! The backend: the authority over idempotency keys (the PostgreSQL claim, the bank call, save
//! and replay, reconciliation and expiry). Built out by the backend issue; nothing runs here yet.
