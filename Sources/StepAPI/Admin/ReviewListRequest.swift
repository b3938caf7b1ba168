import Foundation
import Hummingbird
import StepAttestation
import StepCore
import StepStore

/// `GET /admin/reviews`'s query, checked: every parameter is optional and a bad one is a 400 naming it.
enum ReviewListRequest {
    static let maxLimit = 200

    static func query(_ parameters: Parameters) throws(AdminAPIError) -> ReviewQuery {
        var query = ReviewQuery()
        let names = ["status", "order", "kind", "reason", "walker", "from", "to", "limit", "cursor"]
        if let name = parameters.repeated(among: names) { throw .badRequest("\(name) must be given once.") }
        if let text = parameters.get("status") {
            guard let status = ReviewStatusFilter(rawValue: text) else {
                throw .badRequest("status must be open, resolved or all.")
            }
            query.status = status
        }
        if let text = parameters.get("order") {
            guard let order = ReviewOrder(rawValue: text) else { throw .badRequest("order must be age or stake.") }
            query.order = order
        }
        if let text = parameters.get("kind") {
            guard let kind = ReviewKind(rawValue: text) else {
                throw .badRequest("kind must be quarantined_day or repeated_rejections.")
            }
            query.kind = kind
        }
        if let text = parameters.get("reason") {
            guard isReasonCode(text) else {
                throw .badRequest("reason must be a reason code (capital letters, digits and _, at most 64).")
            }
            query.reason = text
        }
        if let text = parameters.get("walker") {
            guard !text.isEmpty, text.unicodeScalars.count <= 256 else {
                throw .badRequest("walker must be a walker id of 1 to 256 characters.")
            }
            query.walkerId = text
        }
        if let text = parameters.get("from") {
            guard let day = LocalDate(iso: text) else { throw .badRequest("from must be a day YYYY-MM-DD.") }
            query.from = day
        }
        if let text = parameters.get("to") {
            guard let day = LocalDate(iso: text) else { throw .badRequest("to must be a day YYYY-MM-DD.") }
            query.to = day
        }
        if let text = parameters.get("limit") {
            guard let limit = Int(text), (1...maxLimit).contains(limit) else {
                throw .badRequest("limit must be an integer from 1 to \(maxLimit).")
            }
            query.limit = limit
        }
        if let text = parameters.get("cursor") {
            guard let key = decodeCursor(text, for: query) else {
                throw .badRequest("cursor is not one this list gave for this status and order.")
            }
            query.after = key
        }
        return query
    }

    /// The opaque cursor of the page after `key`: base64url of the list's status and order and the key.
    static func cursor(_ key: ReviewPageKey, for query: ReviewQuery) -> String {
        let fields = [
            "r1", query.status.rawValue, query.order.rawValue, String(key.first), key.second.map(String.init) ?? "",
            key.entryId,
        ]
        return Base64URL.encode(Array(fields.joined(separator: "|").utf8))
    }

    static func decodeCursor(_ text: String, for query: ReviewQuery) -> ReviewPageKey? {
        guard text.utf8.count <= 512, let data = Base64URL.decode(text),
            let decoded = String(bytes: data, encoding: .utf8), !decoded.hasControlCharacters
        else { return nil }
        let fields = decoded.split(separator: "|", maxSplits: 5, omittingEmptySubsequences: false).map(String.init)
        guard fields.count == 6, fields[0] == "r1", fields[1] == query.status.rawValue,
            fields[2] == query.order.rawValue, let first = Int(fields[3]), !fields[5].isEmpty
        else { return nil }
        var second: Int?
        if !fields[4].isEmpty {
            guard let value = Int(fields[4]) else { return nil }
            second = value
        }
        let key = ReviewPageKey(first: first, second: second, entryId: fields[5])
        return query.accepts(key) ? key : nil
    }

    static func isReasonCode(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64
            && text.utf8.allSatisfy { byte in
                (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
            }
    }
}
