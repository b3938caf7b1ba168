/// What a privacy check looks for in log output: a number standing on its own.
package enum LoggedText {
    /// Whether `text` holds `number` as a number of its own: a run of digits with no letter, digit or "." before
    /// it and no letter after it. A substring check would also match inside a latency's decimals
    /// (`"latencyMs":2910.67435000`) or a hex request id, and fail a test at random; this matches `6000`,
    /// `"count":6000`, `steps=6000` and `6000.0`, and never those.
    package static func mentions(_ number: Int, in text: String) -> Bool {
        let wanted = Array(String(number).utf8)
        let bytes = Array(text.utf8)
        var start = 0
        while start < bytes.count {
            guard isDigit(bytes[start]) else {
                start += 1
                continue
            }
            var end = start
            while end < bytes.count, isDigit(bytes[end]) { end += 1 }
            let joinedBefore = start > 0 && (isLetterOrDigit(bytes[start - 1]) || bytes[start - 1] == UInt8(ascii: "."))
            let joinedAfter = end < bytes.count && isLetterOrDigit(bytes[end])
            if !joinedBefore, !joinedAfter, bytes[start..<end].elementsEqual(wanted) { return true }
            start = end
        }
        return false
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    private static func isLetterOrDigit(_ byte: UInt8) -> Bool {
        isDigit(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20) || byte >= 0x80
    }
}
