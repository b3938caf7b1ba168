extension Substring {
    /// The text without leading and trailing spaces and tabs (HTTP's optional whitespace), found byte by
    /// byte: Foundation's `trimmingCharacters(in:)` converted a whole bearer token to UTF-16 on every request.
    var trimmingHTTPWhitespace: Substring {
        let isBlank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        guard let first = utf8.firstIndex(where: { !isBlank($0) }),
            let last = utf8.lastIndex(where: { !isBlank($0) })
        else { return self[endIndex...] }
        // The byte after the last non-blank one is a blank or the end, so it starts a character.
        return self[first..<utf8.index(after: last)]
    }
}
