import Foundation
import StepAttestation
import StepStore

/// The opaque cursor of a list paged by `(instant, id)`: base64url of `<milliseconds since 1970>:<id>`. The
/// walker's ledger, the admin audit and the job list hand it out as their next page's cursor and read it back.
struct KeysetCursor: Sendable, Hashable {
    var milliseconds: Int
    var id: String

    init(_ instant: Date, id: String) {
        self.milliseconds = instant.millisecondsSince1970
        self.id = id
    }

    /// The latest time a cursor may name: 9999-12-31T23:59:59.999Z, the last instant the service writes.
    static let maximumMilliseconds = 253_402_300_799_999

    /// Nil for any text the lists did not hand out: not base64url, no separator, a time before 1970 or after
    /// `maximumMilliseconds` (the job list turns it into a `Date` and back), or a control character (a NUL would
    /// reach PostgreSQL, which refuses it in text).
    init?(text: String) {
        guard text.utf8.count <= 512,
            let decoded = Base64URL.decode(text).flatMap({ String(data: $0, encoding: .utf8) }),
            !decoded.hasControlCharacters, let separator = decoded.firstIndex(of: ":"),
            let milliseconds = Int(decoded[..<separator]),
            (0...Self.maximumMilliseconds).contains(milliseconds)
        else { return nil }
        self.milliseconds = milliseconds
        self.id = String(decoded[decoded.index(after: separator)...])
    }

    var instant: Date { Date(millisecondsSince1970: milliseconds) }

    var text: String { Base64URL.encode(Data("\(milliseconds):\(id)".utf8)) }
}

extension StringProtocol {
    /// Whether the text holds a C0 control character or DEL: never part of an id this service hands out.
    var hasControlCharacters: Bool { utf8.contains { $0 < 0x20 || $0 == 0x7F } }
}
