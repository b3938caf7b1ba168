import HTTPTypes
import Hummingbird

/// Every route the application registers, so a test can hold it against `openapi.yaml`.
package struct RouteCatalog: Sendable {
    package struct Entry: Hashable, Sendable, Comparable, CustomStringConvertible {
        package var method: String
        package var path: String

        package static func < (lhs: Entry, rhs: Entry) -> Bool { (lhs.path, lhs.method) < (rhs.path, rhs.method) }
        package var description: String { "\(method.uppercased()) \(path)" }
    }

    package private(set) var entries: Set<Entry> = []

    mutating func add(_ method: HTTPRequest.Method, _ path: String) {
        entries.insert(Entry(method: method.rawValue.lowercased(), path: path))
    }
}

extension RouterGroup<AppRequestContext> {
    /// Registers a route and catalogues it, so the catalogue names every route the router serves.
    @discardableResult
    func on(
        _ method: HTTPRequest.Method, _ path: String, catalog: inout RouteCatalog,
        use handler: @escaping @Sendable (Request, AppRequestContext) async throws -> Response
    ) -> Self {
        catalog.add(method, path)
        return on(RouterPath(stringLiteral: path), method: method, use: handler)
    }
}
