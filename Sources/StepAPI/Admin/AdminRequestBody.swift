import Hummingbird
import StepCore

/// The JSON object body of a state-changing admin route, read whole (at most 16 KiB, any media type) into its
/// fields; the contract's one note rule (1 to 2 000 characters) is checked here for every action.
struct AdminRequestBody: Sendable {
    static let maxBytes = 16 * 1024
    static let maxNoteLength = 2_000

    let fields: [String: JSONValue]

    static func read(_ request: Request) async throws -> AdminRequestBody {
        var request = request
        guard let body = try? await request.collectBody(upTo: maxBytes),
            case .object(let fields) = JSONReader.read(body.readableBytesView)
        else {
            throw AdminAPIError.bodyRefused(.unsupportedMediaType())
        }
        return AdminRequestBody(fields: fields)
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
}
