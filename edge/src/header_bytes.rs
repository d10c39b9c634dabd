//! Header values as the bytes the client sent.
//!
//! HTTP header values are bytes; the Workers runtime hands them to Wasm as JavaScript strings in
//! which each byte became one character (U+0000 to U+00FF, a "ByteString"). Rust receives those
//! strings as UTF-8, where a byte above 0x7F takes two. The backend checks the raw bytes (a key
//! with byte 0xE9 is refused naming 0xe9), so the edge turns each character back into its byte
//! before checking, to refuse the same header with the same words.

/// The bytes behind a header value the runtime gave as a string. A character above U+00FF
/// cannot come from a header; should one appear, it becomes `0xFF`, which no check accepts.
pub fn header_bytes(value: &str) -> Vec<u8> {
    value
        .chars()
        .map(|c| u8::try_from(u32::from(c)).unwrap_or(u8::MAX))
        .collect()
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn ascii_values_are_unchanged() {
        assert_eq!(header_bytes("Bearer abc.def"), b"Bearer abc.def");
    }

    #[test]
    fn each_character_up_to_u_ff_is_one_byte() {
        assert_eq!(header_bytes("caf\u{e9}"), b"caf\xe9");
        assert_eq!(header_bytes("\u{ff}\u{80}"), [0xff, 0x80]);
    }

    #[test]
    fn characters_beyond_a_byte_become_an_invalid_byte() {
        assert_eq!(header_bytes("\u{20ac}"), [0xff]);
    }
}
