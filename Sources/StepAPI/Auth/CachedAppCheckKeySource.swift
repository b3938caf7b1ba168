import Foundation
import Logging
import StepAttestation
import _CryptoExtras

/// App Check keys from a URL through the shared `JWKSCache`, so they follow the same fetch, refetch and back-off
/// rules as the session keys. Each new document is parsed once.
actor CachedAppCheckKeySource: AppCheckKeySource {
    private let url: String
    private let cache: JWKSCache
    private let logger: Logger
    /// The key set of the newest document seen, and whether it is that document's own (false: it had none usable,
    /// and this is the previous document's).
    private var parsed: (generation: Int, keySet: AppCheckJWKS?, own: Bool)?
    /// When the host last served the key set in use: the time of the latest fetch of a document it came from.
    private var keysServedAt: Date?

    init(url: String, cache: JWKSCache, logger: Logger) {
        self.url = url
        self.cache = cache
        self.logger = logger
    }

    func publicKey(for keyID: String, now: Date) async throws(AppCheckError) -> _RSA.Signing.PublicKey {
        let document: JWKSDocument
        do {
            document = try await cache.document(url)
        } catch {
            throw AppCheckError(.keySetUnavailable, detail: error.description)
        }
        let current: AppCheckJWKS?
        do {
            current = try await usableKeySet(of: document)
        } catch {
            // The keys in use are too old and the newest document has none usable: the host may have been fixed
            // since; ask for a newer one (the cache allows one such fetch a minute).
            guard case .newer(let newer) = await cache.refresh(url, after: document.generation) else { throw error }
            guard let key = try await usableKeySet(of: newer)?[keyID] else { throw error }
            return key
        }
        if let key = current?[keyID] { return key }
        // Google rotates its keys: an unknown kid asks for a newer document (the cache decides whether to fetch).
        switch await cache.refresh(url, after: document.generation) {
        case .newer(let newer):
            if let key = try await usableKeySet(of: newer)?[keyID] { return key }
        case .current:
            break
        case .hostFailing:
            throw AppCheckError(.keySetUnavailable, detail: "unknown kid while the key host fails")
        }
        guard try await usableKeySet(of: document) != nil else {
            throw AppCheckError(.keySetUnavailable, detail: "no usable App Check key set")
        }
        throw AppCheckError(.unknownKeyID, detail: keyID)
    }

    /// The key set to verify with while `document` is the newest: its own, or, when it has none usable, the previous
    /// one for as long as the cache's maximum age allows after the host last served it.
    private func usableKeySet(of document: JWKSDocument) async throws(AppCheckError) -> AppCheckJWKS? {
        let keySet = keySet(of: document)
        if parsed?.own == true {
            keysServedAt = max(keysServedAt ?? document.fetchedAt, document.fetchedAt)
            return keySet
        }
        if keySet != nil, let keysServedAt, await cache.pastMaximumAge(keysServedAt) {
            throw AppCheckError(
                .keySetUnavailable, detail: "the key host has served no usable key set for over its maximum age")
        }
        return keySet
    }

    /// The key set of the newest document seen; one that does not parse keeps the previous key set.
    private func keySet(of document: JWKSDocument) -> AppCheckJWKS? {
        if let parsed, parsed.generation >= document.generation { return parsed.keySet }
        do {
            let keySet = try AppCheckJWKS(json: document.data)
            parsed = (document.generation, keySet, true)
            return keySet
        } catch {
            logger.warning("App Check JWKS refused; keeping the previous keys", metadata: ["error": "\(error)"])
            let previous = parsed?.keySet
            parsed = (document.generation, previous, false)
            return previous
        }
    }
}
