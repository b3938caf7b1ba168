import Crypto
import Foundation
import HTTPTypes
import Hummingbird

/// One file of the console as it is served: its route, its media type, its bytes and their version (the start of
/// the SHA-256 of the bytes, also the ETag).
struct ConsoleAsset: Sendable {
    /// How long a browser may keep it without asking again.
    enum Caching: Sendable {
        /// Asked again every time (answered 304 while the ETag matches): the page, so a new build shows at once.
        case revalidate
        /// Kept for a year when the URL carries this very version (`?v=`), which only the page's links do.
        case immutableWhenVersioned
    }

    let route: String
    let contentType: String
    let body: [UInt8]
    let version: String
    let caching: Caching

    init(route: String, contentType: String, text: String, caching: Caching) {
        self.route = route
        self.contentType = contentType
        self.body = Array(text.utf8)
        self.version = SHA256.hash(data: body).prefix(8).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
        self.caching = caching
    }

    var etag: String { "\"\(version)\"" }

    /// The asset's URL with its version, as the page links it.
    var versionedURL: String { "\(route)?v=\(version)" }

    /// The console's strict policy: only this server's own script, style sheet and JSON; no frames, no plugins.
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        + "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!

    /// 200 with the bytes, or 304 without them when the request's `If-None-Match` names this version.
    func response(to request: Request) -> Response {
        let versioned = request.uri.queryParameters.get("v") == version
        var headers: HTTPFields = [
            .contentType: contentType,
            .eTag: etag,
            .cacheControl: caching == .immutableWhenVersioned && versioned
                ? "public, max-age=31536000, immutable" : "no-cache",
            .contentSecurityPolicy: Self.contentSecurityPolicy,
            .xContentTypeOptions: "nosniff",
            Self.referrerPolicy: "no-referrer",
        ]
        if let match = request.headers[.ifNoneMatch], Self.matches(match, etag: etag) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentLength] = String(body.count)
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// Whether an `If-None-Match` list names `etag` (weak or strong) or is `*` (RFC 9110 §13.1.2).
    static func matches(_ field: String, etag: String) -> Bool {
        field.split(separator: ",").contains { candidate in
            let tag = candidate.trimmingCharacters(in: .whitespaces)
            return tag == "*" || tag == etag || tag == "W/" + etag
        }
    }
}
