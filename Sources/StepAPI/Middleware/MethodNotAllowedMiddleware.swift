import HTTPTypes
import Hummingbird
import StepCore
import StepLogging

/// Answers 405 with `Allow` (RFC 9110 §15.5.6) for a known path asked with a method it does not serve, where the
/// router alone would answer 404. Added to the router after every route, so it wraps only the router's not-found
/// responder: a matched route never passes through it. Under a surface with its own envelope (`/health`, seed
/// 002) both answers are that surface's: its 404 for an unknown path, its 405 (with `Allow`) for a known one.
struct MethodNotAllowedMiddleware: RouterMiddleware {
    /// How a surface with an envelope of its own answers a request no route of it serves.
    struct SurfaceMisses: Sendable {
        var prefix: String
        var notFound: any HTTPResponseError & Sendable
        var methodNotAllowed: @Sendable (_ method: String, _ allow: String) -> any HTTPResponseError & Sendable
    }

    typealias Context = AppRequestContext

    private static let allowField = HTTPField.Name("Allow")!

    /// Each catalogued path as segments (`{id}` matches any one segment), with its methods, sorted.
    private let paths: [(segments: [Substring], methods: [String])]
    /// Path prefixes whose 404 and 405 are a surface's own (`/health` answers in `HealthAPIError`).
    private let surfaces: [SurfaceMisses]

    /// `hiddenPrefixes`: paths that must look absent (the admin API without its token), so they stay 404.
    init(catalog: RouteCatalog, hiddenPrefixes: [String] = [], surfaces: [SurfaceMisses] = []) {
        self.surfaces = surfaces
        var methods: [String: Set<String>] = [:]
        for entry in catalog.entries where !hiddenPrefixes.contains(where: { entry.path.hasPrefix($0) }) {
            methods[entry.path, default: []].insert(entry.method.uppercased())
        }
        paths = methods.keys.sorted().map { path in
            (Self.segments(path), methods[path, default: []].sorted())
        }
    }

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            // A path the router did not match although the catalog names it with this very method (a spelling
            // the router reads differently) stays 404: 405 would name a method that was just refused.
            guard let methods = allowedMethods(for: request.uri.path), !methods.contains(request.method.rawValue)
            else {
                if let surface = surface(for: request.uri.path) { throw surface.notFound }
                // The API's envelope, as every other answer of it: a client parsing errors finds `error` here too.
                // The admin API without its token looks the same, absent.
                return Response(
                    status: .notFound, headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: Self.notFoundBody)))
            }
            let allow = methods.joined(separator: ", ")
            if let surface = surface(for: request.uri.path) {
                throw surface.methodNotAllowed(request.method.rawValue, allow)
            }
            return Response(
                status: .methodNotAllowed,
                headers: [Self.allowField: allow, .contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: Self.body(method: request.method.rawValue, allow: allow))))
        }
    }

    /// The surface whose prefix `path` falls under (the prefix itself or below it), if any: compared by segments,
    /// as the router reads a path, so `//health/x` is the health surface's as `/health/x` is.
    private func surface(for path: String) -> SurfaceMisses? {
        let requested = Self.segments(path)
        return surfaces.first { surface in
            let prefix = Self.segments(surface.prefix)
            return requested.count >= prefix.count && zip(prefix, requested).allSatisfy { $0 == $1 }
        }
    }

    /// The methods of the catalogued path that `path` names, or nil when none does.
    func allowedMethods(for path: String) -> [String]? {
        let requested = Self.segments(path)
        return paths.first { candidate in
            candidate.segments.count == requested.count
                && zip(candidate.segments, requested).allSatisfy { template, segment in
                    template.hasPrefix("{") || template == segment
                }
        }?.methods
    }

    private static func segments(_ path: String) -> [Substring] {
        path.split(separator: "/", omittingEmptySubsequences: true)
    }

    /// The API's envelope for a path no route serves: the same bytes as the admin API's answer while it is off
    /// (`AdminAPIError.absent`), so neither tells the other apart.
    static let notFoundBody = JSONTextWriter.object(capacity: 96) { json in
        json.key("details")
        json.beginObject()
        json.endObject()
        json.member("error", "NOT_FOUND")
        json.member("message", "Not found.")
    }

    /// The ingest surface's envelope, `{error, message, details}`, naming the methods the path serves.
    private static func body(method: String, allow: String) -> String {
        JSONTextWriter.object(capacity: 160) { json in
            json.key("details")
            json.beginObject()
            json.member("allow", allow)
            json.endObject()
            json.member("error", "METHOD_NOT_ALLOWED")
            json.member("message", "This path does not serve \(method).")
        }
    }
}
