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
    private var parsed: (generation: Int, keySet: AppCheckJWKS?)?

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
        if let key = keySet(of: document)?[keyID] { return key }
        // Google rotates its keys: an unknown kid asks for a newer document (the cache decides whether to fetch).
        switch await cache.refresh(url, after: document.generation) {
        case .newer(let newer):
            if let key = keySet(of: newer)?[keyID] { return key }
        case .current:
            break
        case .hostFailing:
            throw AppCheckError(.keySetUnavailable, detail: "unknown kid while the key host fails")
        }
        guard keySet(of: document) != nil else {
            throw AppCheckError(.keySetUnavailable, detail: "no usable App Check key set")
        }
        throw AppCheckError(.unknownKeyID, detail: keyID)
    }

    /// The key set of the newest document seen; one that does not parse keeps the previous key set.
    private func keySet(of document: JWKSDocument) -> AppCheckJWKS? {
        if let parsed, parsed.generation >= document.generation { return parsed.keySet }
        var keySet = parsed?.keySet
        do {
            keySet = try AppCheckJWKS(json: document.data)
        } catch {
            logger.warning("App Check JWKS refused; keeping the previous keys", metadata: ["error": "\(error)"])
        }
        parsed = (document.generation, keySet)
        return keySet
    }
}
