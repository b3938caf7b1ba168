import Crypto
import Foundation
import StepCore
import StepStore

/// The body of `POST /walker/allocations`: `{"kind", "nodeId", "points", "idempotencyKey"}`.
struct AllocationRequest: IdempotentBody, Hashable {
    static let maxPoints = 1_000_000_000
    static let maxNodeIdLength = 128

    var kind: AllocationKind
    var nodeId: String
    var points: Int
    var idempotencyKey: String

    /// What a replay must match: the spend itself, not the key.
    var payloadHash: String {
        let canonical = "\(kind.rawValue)\u{0}\(nodeId)\u{0}\(points)"
        return SHA256.hash(data: Array(canonical.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// The key as the idempotency table holds it: apart from the walker's ingest keys, so one key string
    /// used for an ingest and for an allocation never collides.
    var storedKey: String { Self.keyPrefix + idempotencyKey }

    static let keyPrefix = "allocation:"

    static func decode(_ bytes: some Collection<UInt8>) throws(RequestValidationError) -> AllocationRequest {
        var reader = FieldReader(object: try FieldReader.members(of: FieldReader.json(bytes)))
        let kind = reader.required("kind", expected: "tree or keystone") { value -> AllocationKind? in
            guard case .string(let text) = value else { return nil }
            return AllocationKind(rawValue: text)
        }
        let nodeId = reader.required(
            "nodeId", expected: "a non-empty string of at most \(maxNodeIdLength) characters"
        ) { value -> String? in
            // Unicode scalars, as JSON Schema's maxLength counts them.
            guard case .string(let text) = value, !text.isEmpty, text.unicodeScalars.count <= maxNodeIdLength else {
                return nil
            }
            return text
        }
        let points = reader.required("points", expected: "an integer from 1 to \(maxPoints)") { value -> Int? in
            guard case .int(let number) = value, number >= 1, number <= maxPoints else { return nil }
            return number
        }
        let key = reader.required(
            "idempotencyKey", expected: "a string of 1 to \(IngestRequest.maxStringLength) printable ASCII characters"
        ) { value -> String? in
            guard case .string(let text) = value, IngestRequest.isValidKey(text) else { return nil }
            return text
        }
        guard reader.problems.isEmpty, let kind, let nodeId, let points, let key else {
            throw RequestValidationError(fields: reader.problems)
        }
        return AllocationRequest(kind: kind, nodeId: nodeId, points: points, idempotencyKey: key)
    }
}

/// The JSON of an allocation: `{"createdAt", "dependsOn", "id", "kind", "nodeId", "points", "refundedPoints",
/// "status"}`.
enum AllocationResponse {
    static func write(_ allocation: AllocationRecord, into json: inout JSONTextWriter) {
        json.beginObject()
        json.member("createdAt", InstantParser.format(allocation.createdAt, fractional: true))
        json.array("dependsOn", allocation.dependsOn) { json, day in json.value(day.description) }
        json.member("id", allocation.id)
        json.member("kind", allocation.kind.rawValue)
        json.member("nodeId", allocation.nodeId)
        json.member("points", allocation.points)
        json.member("refundedPoints", allocation.refundedPoints)
        json.member("status", allocation.status.rawValue)
        json.endObject()
    }

    static func single(_ allocation: AllocationRecord) -> String {
        var json = JSONTextWriter(capacity: 256)
        write(allocation, into: &json)
        return json.text
    }

    static func list(_ allocations: [AllocationRecord]) -> String {
        JSONTextWriter.object(capacity: 64 + 200 * allocations.count) { json in
            json.array("items", allocations) { json, allocation in write(allocation, into: &json) }
        }
    }
}
