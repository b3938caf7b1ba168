import Foundation
import JWTKit
import Logging
import StepCore
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
    /// The keys of the newest document seen, and whether they are its own (false: it had none the server can use,
    /// and these are the previous document's). A task, so requests arriving while it is parsed await the same parse.
    private var urlKeys: (generation: Int, keys: Task<(keys: [SessionKey], own: Bool), Never>)?
    /// When the host last served the keys in use: the time of the latest fetch of a document they came from.
    private var keysServedAt: Date?

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
            fileKeys = try await Self.parse(jwks: data, origin: "jwt.jwksFile", logger: logger)
        case .url(let url):
            let document: JWKSDocument
            do {
                document = try await cache.document(url)
            } catch {
                throw KeyLoadingError(description: "jwt.jwksUrl: \(error)")
            }
            let keys = try await Self.parse(jwks: document.data, origin: "jwt.jwksUrl", logger: logger)
            urlKeys = (document.generation, Task { (keys, true) })
            keysServedAt = document.fetchedAt
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
        guard let keys = await usableKeys(of: document) else {
            // The keys in use are too old and the newest document has none usable: the host may have been fixed
            // since; ask for a newer one (the cache allows one such fetch a minute).
            guard case .newer(let newer) = await cache.refresh(url, after: document.generation),
                let keys = await usableKeys(of: newer)
            else { return .unavailable }
            return Self.match(kid: kid, algorithm: algorithm, in: keys).map { .found($0) } ?? .unknown
        }
        if let found = Self.match(kid: kid, algorithm: algorithm, in: keys) { return .found(found) }
        // Without a kid nothing names a key to wait for: no refetch could change the answer.
        guard kid != nil else { return .unknown }
        // An unknown kid may be a rotation: ask for a newer document (the cache decides whether to fetch).
        switch await cache.refresh(url, after: document.generation) {
        case .newer(let newer):
            guard let keys = await usableKeys(of: newer) else { return .unavailable }
            return Self.match(kid: kid, algorithm: algorithm, in: keys).map { .found($0) } ?? .unknown
        case .current: return .unknown
        case .hostFailing: return .unavailable
        }
    }

    /// The keys to verify with while `document` is the newest: its own, or, when it has none the server can use,
    /// the previous document's for as long as the cache's maximum age allows after the host last served them; nil
    /// past that.
    private func usableKeys(of document: JWKSDocument) async -> [SessionKey]? {
        let parsed = await keys(of: document)
        if parsed.own {
            keysServedAt = max(keysServedAt ?? document.fetchedAt, document.fetchedAt)
            return parsed.keys
        }
        guard let keysServedAt, await !cache.pastMaximumAge(keysServedAt) else { return nil }
        return parsed.keys
    }

    /// The keys of `document`, parsed once per generation; a document that does not parse keeps the previous keys.
    private func keys(of document: JWKSDocument) async -> (keys: [SessionKey], own: Bool) {
        if let current = urlKeys, current.generation >= document.generation { return await current.keys.value }
        let previous = urlKeys?.keys
        let logger = logger
        let parse = Task { () -> (keys: [SessionKey], own: Bool) in
            do {
                return (try await Self.parse(jwks: document.data, origin: "jwt.jwksUrl", logger: logger), true)
            } catch {
                logger.warning("JWKS document refused; keeping the previous keys", metadata: ["error": "\(error)"])
                return (await previous?.value.keys ?? [], false)
            }
        }
        urlKeys = (document.generation, parse)
        return await parse.value
    }

    private static func match(kid: String?, algorithm: String, in keys: [SessionKey]) -> SessionKey? {
        if let kid {
            // Keys of different types may share a kid (RFC 7517 §4.5): the one of the token's algorithm.
            return keys.first { $0.kid == kid && $0.algorithm == algorithm } ?? keys.first { $0.kid == kid }
        }
        // Without a kid, only an unambiguous key of that algorithm is used.
        let candidates = keys.filter { $0.algorithm == algorithm }
        return candidates.count == 1 ? candidates[0] : nil
    }

    /// The signing keys of a JWKS document. A key the server cannot verify with (another algorithm or curve, an
    /// encryption key by its `use`, a type it does not know) is skipped, as RFC 7517 §5 asks, and named in the
    /// log, so a key host that also publishes such keys does not lose its signing keys; a document with no usable
    /// key at all is refused.
    static func parse(jwks data: Data, origin: String, logger: Logger? = nil) async throws -> [SessionKey] {
        guard case .object(let document)? = JSONReader.read(data), case .array(let elements)? = document["keys"]
        else {
            throw KeyLoadingError(description: "\(origin): not a JWKS document (an object with a keys array)")
        }
        var keys: [SessionKey] = []
        var skipped: [String] = []
        for element in elements {
            let named: String
            if case .object(let members) = element, case .string(let kid)? = members["kid"] {
                named = "key \(kid)"
            } else {
                named = "a key without kid"
            }
            switch await key(element) {
            case .success(let key): keys.append(key)
            case .failure(let reason): skipped.append("\(named): \(reason)")
            }
        }
        guard !keys.isEmpty else {
            let reasons = skipped.isEmpty ? "" : " (skipped \(skipped.joined(separator: "; ")))"
            throw KeyLoadingError(description: "\(origin): the JWKS holds no usable signing key\(reasons)")
        }
        if !skipped.isEmpty {
            logger?.warning(
                "JWKS keys skipped", metadata: ["origin": "\(origin)", "skipped": "\(skipped.joined(separator: "; "))"])
        }
        return keys
    }

    /// One key of a JWKS as the server can use it, or why it cannot.
    private static func key(_ element: JSONValue) async -> Result<SessionKey, KeySkipped> {
        guard case .object(let members) = element else { return .failure("not an object") }
        if let use = members["use"], use != .string("sig") { return .failure("not a signing key (use)") }
        let jwk: JWK
        do {
            jwk = try JSONDecoder().decode(JWK.self, from: Data(try JSONCoding.encode(element).utf8))
        } catch {
            return .failure("not a key of a type or algorithm the server knows")
        }
        guard let algorithm = algorithm(of: jwk) else { return .failure("not ES256, RS256 or EdDSA") }
        // A kid is optional in RFC 7517, but the server finds keys by it: a token names the key it was signed with,
        // and an unknown kid is what makes a key set from a URL be fetched again after a rotation.
        guard jwk.keyIdentifier != nil else { return .failure("no kid (the server finds keys by their kid)") }
        let collection = JWTKeyCollection()
        do {
            try await collection.add(jwk: jwk, isDefault: true)
        } catch {
            return .failure(KeySkipped("unusable (\(error))"))
        }
        return .success(SessionKey(kid: jwk.keyIdentifier?.string, algorithm: algorithm, collection: collection))
    }

    private struct KeySkipped: Error, ExpressibleByStringLiteral, CustomStringConvertible {
        var description: String
        init(stringLiteral value: String) { description = value }
        init(_ value: String) { description = value }
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
