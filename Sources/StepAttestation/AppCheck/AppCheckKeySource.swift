import Foundation
import _CryptoExtras

/// Where the App Check verifier finds the public key for a token's `kid`.
package protocol AppCheckKeySource: Sendable {
    func publicKey(for keyID: String, now: Date) async throws(AppCheckError) -> _RSA.Signing.PublicKey
}

/// A fixed key set, from a JSON string or file.
package struct StaticAppCheckKeySource: AppCheckKeySource {
    package let keySet: AppCheckJWKS

    package init(keySet: AppCheckJWKS) { self.keySet = keySet }

    package func publicKey(for keyID: String, now: Date) async throws(AppCheckError) -> _RSA.Signing.PublicKey {
        guard let key = keySet[keyID] else { throw AppCheckError(.unknownKeyID, detail: keyID) }
        return key
    }
}

/// A key set fetched on demand and cached for `timeToLive`. An unknown `kid` (Google rotated its keys)
/// triggers a refetch, but fetches happen at most once per `minimumFetchInterval`, so a flood of forged
/// `kid`s cannot turn into a flood of requests. When a fetch fails, the previous keys stay in use.
package actor CachingAppCheckKeySource: AppCheckKeySource {
    package typealias Fetch = @Sendable () async throws -> Data

    private let fetch: Fetch
    private let timeToLive: TimeInterval
    private let minimumFetchInterval: TimeInterval
    private var cached: (keySet: AppCheckJWKS, fetchedAt: Date)?
    private var lastAttempt: Date?
    private var lastFailure: String?
    private var inFlight: PendingFetch?

    private struct PendingFetch {
        var task: Task<Result<AppCheckJWKS, AppCheckError>, Never>
        var startedAt: Date
    }

    package init(timeToLive: TimeInterval = 6 * 3600, minimumFetchInterval: TimeInterval = 60, fetch: @escaping Fetch) {
        self.fetch = fetch
        self.timeToLive = timeToLive
        self.minimumFetchInterval = minimumFetchInterval
    }

    package func publicKey(for keyID: String, now: Date) async throws(AppCheckError) -> _RSA.Signing.PublicKey {
        if let pending = inFlight { await complete(pending) }
        if let cached, now.timeIntervalSince(cached.fetchedAt) < timeToLive, let key = cached.keySet[keyID] {
            return key
        }
        if lastAttempt.map({ now.timeIntervalSince($0) >= minimumFetchInterval || now < $0 }) ?? true {
            await complete(startFetch(now: now))
        }
        if let key = cached?.keySet[keyID] { return key }
        if cached == nil { throw AppCheckError(.keySetUnavailable, detail: lastFailure ?? "no key set fetched yet") }
        throw AppCheckError(.unknownKeyID, detail: keyID)
    }

    private func startFetch(now: Date) -> PendingFetch {
        lastAttempt = now
        let fetch = self.fetch
        let task = Task { () -> Result<AppCheckJWKS, AppCheckError> in
            let data: Data
            do {
                data = try await fetch()
            } catch let error as AppCheckError {
                return .failure(error)
            } catch {
                return .failure(AppCheckError(.keySetUnavailable, detail: String(describing: type(of: error))))
            }
            do throws(AppCheckError) {
                return .success(try AppCheckJWKS(json: data))
            } catch {
                return .failure(error)
            }
        }
        let pending = PendingFetch(task: task, startedAt: now)
        inFlight = pending
        return pending
    }

    /// Every caller that awaited a fetch applies its result, so whichever resumes first sees the new keys.
    private func complete(_ pending: PendingFetch) async {
        let result = await pending.task.value
        if inFlight?.task == pending.task { inFlight = nil }
        switch result {
        case .success(let keySet):
            if cached.map({ $0.fetchedAt <= pending.startedAt }) ?? true { cached = (keySet, pending.startedAt) }
            lastFailure = nil
        case .failure(let error):
            lastFailure = error.description
        }
    }
}
