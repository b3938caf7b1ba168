import AsyncHTTPClient
import Foundation
import JWTKit
import Logging
import NIOCore

/// Where session verification keys come from.
package enum JWKSSource: Sendable, Hashable {
    case none
    case file(String)
    case url(String)
}

/// Why the configured session keys could not be loaded.
package struct KeyLoadingError: Error, Sendable, CustomStringConvertible {
    package var description: String
}

/// The session verification keys: a JWKS (file or URL) plus, outside production, the development HS256 key.
/// A URL JWKS is cached and fetched again after `refreshInterval`, or at most once a minute on an unknown `kid`.
package actor SessionKeyRing {
    static let developmentKid = "stepledger-dev"

    private let source: JWKSSource
    private let developmentSecret: [UInt8]?
    private let refreshInterval: Double
    private let httpClient: HTTPClient?
    private let logger: Logger
    private var jwksKeys: [SessionKey] = []
    private var developmentKey: SessionKey?
    private var loadedAt: Date = .distantPast
    private var lastUnknownKidFetch: Date = .distantPast

    init(
        source: JWKSSource, developmentSecret: [UInt8]?, refreshInterval: Double = 6 * 3600,
        httpClient: HTTPClient?, logger: Logger
    ) {
        self.source = source
        self.developmentSecret = developmentSecret
        self.refreshInterval = refreshInterval
        self.httpClient = httpClient
        self.logger = logger
    }

    /// Loads every key; throws with a readable message when the configured source is unusable.
    func load() async throws {
        if let developmentSecret {
            let collection = JWTKeyCollection()
            await collection.add(
                hmac: HMACKey(from: developmentSecret), digestAlgorithm: .sha256,
                kid: JWKIdentifier(string: Self.developmentKid))
            developmentKey = SessionKey(kid: Self.developmentKid, algorithm: "HS256", collection: collection)
        }
        switch source {
        case .none:
            break
        case .file(let path):
            guard let data = FileManager.default.contents(atPath: path) else {
                throw KeyLoadingError(description: "jwt.jwksFile: cannot read \(path)")
            }
            jwksKeys = try await Self.parse(jwks: data, origin: "jwt.jwksFile")
        case .url(let url):
            jwksKeys = try await fetch(url)
        }
        loadedAt = Date()
    }

    func key(kid: String?, algorithm: String) async -> SessionKey? {
        if algorithm == "HS256" {
            guard let developmentKey, kid == nil || kid == Self.developmentKid else { return nil }
            return developmentKey
        }
        if case .url(let url) = source, Date().timeIntervalSince(loadedAt) > refreshInterval {
            await refresh(url)
        }
        if let found = match(kid: kid, algorithm: algorithm) { return found }
        if case .url(let url) = source, kid != nil, Date().timeIntervalSince(lastUnknownKidFetch) > 60 {
            lastUnknownKidFetch = Date()
            await refresh(url)
            return match(kid: kid, algorithm: algorithm)
        }
        return nil
    }

    private func match(kid: String?, algorithm: String) -> SessionKey? {
        if let kid {
            return jwksKeys.first { $0.kid == kid }
        }
        // Without a kid, only an unambiguous key of that algorithm is used.
        let candidates = jwksKeys.filter { $0.algorithm == algorithm }
        return candidates.count == 1 ? candidates[0] : nil
    }

    private func refresh(_ url: String) async {
        do {
            jwksKeys = try await fetch(url)
            loadedAt = Date()
        } catch {
            logger.warning("JWKS refresh failed; keeping the previous keys", metadata: ["error": "\(error)"])
        }
    }

    private func fetch(_ url: String) async throws -> [SessionKey] {
        guard let httpClient else { throw KeyLoadingError(description: "jwt.jwksUrl: no HTTP client") }
        do {
            let response = try await httpClient.execute(HTTPClientRequest(url: url), timeout: .seconds(10))
            guard response.status == .ok else {
                throw KeyLoadingError(description: "jwt.jwksUrl: \(url) answered \(response.status.code)")
            }
            let body = try await response.body.collect(upTo: 1 << 20)
            return try await Self.parse(jwks: Data(buffer: body), origin: "jwt.jwksUrl")
        } catch let error as KeyLoadingError {
            throw error
        } catch {
            throw KeyLoadingError(description: "jwt.jwksUrl: cannot fetch \(url): \(error)")
        }
    }

    static func parse(jwks data: Data, origin: String) async throws -> [SessionKey] {
        let set: JWKS
        do {
            set = try JSONDecoder().decode(JWKS.self, from: data)
        } catch {
            throw KeyLoadingError(description: "\(origin): not a JWKS document (\(error))")
        }
        var keys: [SessionKey] = []
        for jwk in set.keys {
            guard let algorithm = algorithm(of: jwk) else {
                throw KeyLoadingError(
                    description:
                        "\(origin): key \(jwk.keyIdentifier?.string ?? "without kid") is not ES256, RS256 or EdDSA")
            }
            let collection = JWTKeyCollection()
            do {
                try await collection.add(jwk: jwk, isDefault: true)
            } catch {
                throw KeyLoadingError(
                    description: "\(origin): unusable key \(jwk.keyIdentifier?.string ?? "without kid"): \(error)")
            }
            keys.append(SessionKey(kid: jwk.keyIdentifier?.string, algorithm: algorithm, collection: collection))
        }
        guard !keys.isEmpty else { throw KeyLoadingError(description: "\(origin): the JWKS holds no keys") }
        return keys
    }

    /// The algorithm a key is bound to: its `alg`, or the one its type implies.
    private static func algorithm(of jwk: JWK) -> String? {
        let declared = jwk.algorithm?.rawValue
        let implied: String?
        switch jwk.keyType.rawValue {
        case "EC": implied = jwk.curve?.rawValue == "P-256" ? "ES256" : nil
        case "RSA": implied = "RS256"
        case "OKP": implied = jwk.curve?.rawValue == "Ed25519" ? "EdDSA" : nil
        default: implied = nil
        }
        guard let implied, declared == nil || declared == implied else { return nil }
        return implied
    }
}
