//! The edge Worker (Cloudflare Workers, Wasm): authenticates, validates and fingerprints requests
//! with the `shared` rules and rejects malformed or in-flight-duplicate ones near the user, then
//! forwards the rest to the backend. Built out by the edge issue; nothing runs here yet.
