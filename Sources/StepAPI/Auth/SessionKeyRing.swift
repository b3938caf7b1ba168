import Foundation
import JWTKit
import Logging
import StepSettings

/// Why the configured session keys could not be loaded.
package struct KeyLoadingError: Error, Sendable, CustomStringConvertible {
    package var description: String
}

/// The session verification keys: a JWKS (file or URL) plus, while `dev.sessionTokens` is on, the development HS256 key.
/// A URL's document comes through the shared `JWKSCache` (time to live, one fetch in flight, refetch on an
/// unknown `kid` at most once a minute, back-off after failures); the ring parses each new document once.
package actor SessionKeyRing {
    static let developmentKid = "stepledger-dev"

    private let source: JWKSSource
    private let developmentSecret: [UInt8]?
    private let cache: JWKSCache
    private let logger: Logger
    private var fileKeys: [SessionKey] = []
    private var developmentKey: SessionKey?
    /// The keys of the newest document seen. A task, so requests arriving while it is parsed await the same parse.
    private var urlKeys: (generation: Int, keys: Task<[SessionKey], Never>)?

    init(source: JWKSSource, developmentSecret: [UInt8]?, cache: JWKSCache, logger: Logger) {
        self.source = source
        self.developmentSecret = developmentSecret
        self.cache = cache
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
            fileKeys = try await Self.parse(jwks: data, origin: "jwt.jwksFile")
        case .url(let url):
            let document: JWKSDocument
            do {
                document = try await cache.document(url)
            } catch {
                throw KeyLoadingError(description: "jwt.jwksUrl: \(error)")
            }
            let keys = try await Self.parse(jwks: document.data, origin: "jwt.jwksUrl")
            urlKeys = (document.generation, Task { keys })
        }
    }

    /// What a token's header finds in the key set.
    enum Lookup: Sendable {
        case found(SessionKey)
        /// No key fits, and the key set is as current as the rules allow.
        case unknown
        /// No key fits, but the key host failed its latest fetch: the token may be signed by a rotated key the
        /// server cannot see yet, so it is neither accepted nor called invalid.
        case unavailable
    }

    func key(kid: String?, algorithm: String) async -> Lookup {
        if algorithm == "HS256" {
            guard let developmentKey, kid == nil || kid == Self.developmentKid else { return .unknown }
            return .found(developmentKey)
        }
        guard case .url(let url) = source else {
            return Self.match(kid: kid, algorithm: algorithm, in: fileKeys).map { .found($0) } ?? .unknown
        }
        guard let document = try? await cache.document(url) else { return .unavailable }
        if let found = Self.match(kid: kid, algorithm: algorithm, in: await keys(of: document)) { return .found(found) }
        // Without a kid nothing names a key to wait for: no refetch could change the answer.
        guard kid != nil else { return .unknown }
        // An unknown kid may be a rotation: ask for a newer document (the cache decides whether to fetch).
        switch await cache.refresh(url, after: document.generation) {
        case .newer(let newer):
            return Self.match(kid: kid, algorithm: algorithm, in: await keys(of: newer)).map { .found($0) } ?? .unknown
        case .current: return .unknown
        case .hostFailing: return .unavailable
        }
    }

    /// The keys of `document`, parsed once per generation; a document that does not parse keeps the previous keys.
    private func keys(of document: JWKSDocument) async -> [SessionKey] {
        if let current = urlKeys, current.generation >= document.generation { return await current.keys.value }
        let previous = urlKeys?.keys
        let logger = logger
        let parse = Task {
            do {
                return try await Self.parse(jwks: document.data, origin: "jwt.jwksUrl")
            } catch {
                logger.warning("JWKS document refused; keeping the previous keys", metadata: ["error": "\(error)"])
                return await previous?.value ?? []
            }
        }
        urlKeys = (document.generation, parse)
        return await parse.value
    }

    private static func match(kid: String?, algorithm: String, in keys: [SessionKey]) -> SessionKey? {
        if let kid {
            return keys.first { $0.kid == kid }
        }
        // Without a kid, only an unambiguous key of that algorithm is used.
        let candidates = keys.filter { $0.algorithm == algorithm }
        return candidates.count == 1 ? candidates[0] : nil
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
