import Hummingbird
import StepCore

/// The JSON object body of a state-changing admin route, read whole into its fields as every JSON body is read
/// (`JSONBody`: `application/json` only, uncompressed, at most 16 KiB); the contract's one note rule (1 to 2 000
/// characters) is checked here for every action. Refusing other media types keeps these routes out of reach of a
/// cross-site form, whose `text/plain` or form-encoded POST needs no CORS preflight.
struct AdminRequestBody: Sendable {
    static let maxBytes = 16 * 1024
    static let maxNoteLength = 2_000
    /// The most ids one bulk request (`/admin/reviews/bulk`, `/admin/jobs/bulk`) names, and the longest id.
    static let maxBulkIds = 100
    static let maxBulkIdLength = 128

    let fields: [String: JSONValue]

    static func read(_ request: Request) async throws(AdminAPIError) -> AdminRequestBody {
        try await JSONBody.read(request, maxBytes: maxBytes, as: AdminAPIError.self) { bytes throws(AdminAPIError) in
            guard case .object(let fields) = JSONReader.read(bytes) else {
                throw AdminAPIError.badRequest("The body must be a JSON object.")
            }
            return AdminRequestBody(fields: fields)
        }.get()
    }

    /// The required `note`.
    func note() throws(AdminAPIError) -> String {
        guard case .string(let note) = fields["note"], !note.isEmpty, note.unicodeScalars.count <= Self.maxNoteLength
        else {
            throw AdminAPIError.badRequest(
                "note must be a non-empty string of at most \(Self.maxNoteLength) characters.")
        }
        return note
    }

    /// A bulk request's `ids`, in the order given: 1 to `maxBulkIds` distinct strings of 1 to `maxBulkIdLength`
    /// characters. `noun` names them in the refusal ("entry", "job").
    func bulkIds(of noun: String) throws(AdminAPIError) -> [String] {
        guard case .array(let values) = fields["ids"], (1...Self.maxBulkIds).contains(values.count) else {
            throw AdminAPIError.badRequest("ids must be an array of 1 to \(Self.maxBulkIds) \(noun) ids.")
        }
        var ids: [String] = []
        var seen: Set<String> = []
        for value in values {
            guard case .string(let id) = value, !id.isEmpty, id.unicodeScalars.count <= Self.maxBulkIdLength else {
                throw AdminAPIError.badRequest(
                    "ids must hold \(noun) ids (strings of 1 to \(Self.maxBulkIdLength) characters).")
            }
            guard seen.insert(id).inserted else { throw AdminAPIError.badRequest("ids must be distinct.") }
            ids.append(id)
        }
        return ids
    }
}
