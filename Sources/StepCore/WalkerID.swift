import Foundation

/// What a walker id (a session token's `sub`) may be: 1 to 128 bytes of UTF-8, in Unicode's composed normal form
/// (NFC), without control characters. The server refuses a token whose `sub` is not one (401 `TOKEN_SUBJECT`), and
/// `stepd token` and `stepd device` refuse to issue for one.
package enum WalkerID {
    /// Why `id` is not a walker id, or nil when it is one.
    package static func problem(_ id: String) -> String? {
        if id.isEmpty || id.utf8.count > 128 { return "must be 1 to 128 bytes" }
        // U+0000 cannot be stored in PostgreSQL's text at all, and the others would split a log line or a CSV row.
        if hasControlCharacter(id) { return "must hold no control character" }
        if !isNFC(id) { return "must be in Unicode NFC (composed form)" }
        return nil
    }

    /// Whether `text` is in Unicode's composed normal form (NFC). Swift compares strings by canonical equivalence,
    /// the databases by their bytes: `é` as one scalar and as `e` + U+0301 would be one walker to every in-memory
    /// map (the ingest cache, the event waits, the rate limiter's turns) and two to the database. Equivalent strings
    /// in NFC are the same bytes, so refusing the other forms keeps the two views one.
    package static func isNFC(_ text: String) -> Bool {
        text.unicodeScalars.elementsEqual(text.precomposedStringWithCanonicalMapping.unicodeScalars)
    }

    /// Whether `text` holds a control character (C0 or DEL).
    package static func hasControlCharacter(_ text: String) -> Bool {
        text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
    }
}
