import Foundation
import StepAttestation
import StepStore

/// The opaque cursor of a list paged by `(instant, id)`: base64url of `<list>|<milliseconds since 1970>:<id>`. The
/// walker's ledger, the admin audit and the job list hand it out as their next page's cursor and read it back; each
/// reads only its own, so one list's cursor given to another is a 400 rather than a page of the other list from an
/// unrelated place.
struct KeysetCursor: Sendable, Hashable {
    /// The list a cursor belongs to, and the tag that says so.
    enum List: String, Sendable {
        case ledger = "l1"
        case audit = "a1"
        case jobs = "j1"
    }

    var list: List
    var milliseconds: Int
    var id: String

    init(_ instant: Date, id: String, list: List) {
        self.list = list
        self.milliseconds = instant.millisecondsSince1970
        self.id = id
    }

    /// The latest time a cursor may name: 9999-12-31T23:59:59.999Z, the last instant the service writes.
    static let maximumMilliseconds = 253_402_300_799_999

    /// Nil for any text `list` did not hand out: not base64url, another list's tag (or none), no separator, a time
    /// before 1970 or after `maximumMilliseconds` (the job list turns it into a `Date` and back), or a control
    /// character (a NUL would reach PostgreSQL, which refuses it in text).
    init?(text: String, list: List) {
        guard text.utf8.count <= 512,
            let decoded = Base64URL.decode(text).flatMap({ String(data: $0, encoding: .utf8) }),
            !decoded.hasControlCharacters, decoded.hasPrefix(list.rawValue + "|")
        else { return nil }
        let position = decoded.dropFirst(list.rawValue.count + 1)
        guard let separator = position.firstIndex(of: ":"), let milliseconds = Int(position[..<separator]),
            (0...Self.maximumMilliseconds).contains(milliseconds)
        else { return nil }
        self.list = list
        self.milliseconds = milliseconds
        self.id = String(position[position.index(after: separator)...])
    }

    var instant: Date { Date(millisecondsSince1970: milliseconds) }

    var text: String { Base64URL.encode(Data("\(list.rawValue)|\(milliseconds):\(id)".utf8)) }
}

extension StringProtocol {
    /// Whether the text holds a C0 control character or DEL: never part of an id this service hands out.
    var hasControlCharacters: Bool { utf8.contains { $0 < 0x20 || $0 == 0x7F } }
}
