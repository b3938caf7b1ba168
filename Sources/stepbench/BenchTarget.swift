import ArgumentParser
import Foundation
import StepDatabase

/// A server a benchmark sends traffic to: a base URL on the loopback interface.
struct BenchTarget: Sendable, CustomStringConvertible {
    static let loopbackHosts: Set<String> = ["127.0.0.1", "localhost", "::1"]

    /// Scheme, host, port and any path prefix, without a trailing slash.
    let base: String

    var description: String { base }

    /// A URL's host as `loopbackHosts` spells it: lower case, an IPv6 address without its brackets.
    static func normalized(_ host: String) -> String {
        let host = host.lowercased()
        return host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    /// `option` names the command-line option in error messages.
    init(parsing text: String, option: String = "--url") throws {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            let rawHost = components.host, !rawHost.isEmpty
        else { throw ValidationError("\(option) must be an absolute http URL such as http://127.0.0.1:8080") }
        guard scheme == "http" else { throw ValidationError("\(option) must use http, not \(scheme)") }
        let host = Self.normalized(rawHost)
        guard Self.loopbackHosts.contains(host) else {
            throw ValidationError("\(option) host must be 127.0.0.1, localhost or ::1, not \(rawHost)")
        }
        guard components.user == nil, components.password == nil, components.query == nil,
            components.fragment == nil
        else { throw ValidationError("\(option) must not carry credentials, a query or a fragment") }
        var path = components.path
        while path.hasSuffix("/") { path.removeLast() }
        let hostPart = host.contains(":") ? "[\(host)]" : host
        base = "http://\(hostPart)" + (components.port.map { ":\($0)" } ?? "") + path
    }

    func url(_ path: String) -> String { base + path }
}

/// `--url`: the server that `load`, `history` and `health-stats` send their traffic to.
struct TargetOptions: ParsableArguments {
    @Option(help: "Base URL of the server. The host must be 127.0.0.1, localhost or ::1.")
    var url: String = "http://127.0.0.1:8080"

    var target: BenchTarget {
        get throws { try BenchTarget(parsing: url) }
    }

    func validate() throws {
        _ = try target
    }
}

/// A `--database` value: a SQLite file, or a PostgreSQL server on the loopback interface or a local socket. The
/// benchmarks that take one migrate it and fill it with rows, so they too reach only this machine.
enum BenchDatabase {
    static func check(_ text: String, option: String = "--database") throws {
        if let problem = DatabaseOpener.problem(text) { throw ValidationError("\(option): \(problem)") }
        guard DatabaseOpener.isPostgres(text) else { return }
        let url: PostgresURL
        do { url = try PostgresURL(parsing: text) } catch { throw ValidationError("\(option): \(error.detail)") }
        guard case .tcp(let rawHost, _) = url.address else { return }
        guard BenchTarget.loopbackHosts.contains(BenchTarget.normalized(rawHost)) else {
            throw ValidationError(
                "\(option) host must be 127.0.0.1, localhost or ::1 (or a socket folder: ?host=/path), not \(rawHost)")
        }
    }
}
