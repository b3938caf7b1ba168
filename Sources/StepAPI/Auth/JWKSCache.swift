import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import StepAttestation

/// A JWKS document as fetched. `generation` grows when a fetch brings different bytes, so a reader parses a
/// document once and knows whether a refetch brought anything new.
package struct JWKSDocument: Sendable {
    package var data: Data
    package var fetchedAt: Date
    package var generation: Int
}

/// No document of a URL could be had: never fetched, and the last fetch failed or a back-off is running.
package struct JWKSUnavailableError: Error, Sendable, CustomStringConvertible {
    package var url: String
    package var reason: String
    package var description: String { "cannot fetch \(JWKSCache.shown(url)): \(reason)" }
}

/// The JWKS documents of every URL the server takes keys from (the session issuer's and Firebase App Check's),
/// under one set of rules, so that neither key set can make requests wait on a host that is down:
/// - one fetch in flight per URL; every request that needs it awaits that same fetch;
/// - a document past `timeToLive` keeps serving while its refetch runs in the background, but never past
///   `maximumAge`: keys the host has not confirmed for that long may have been withdrawn (a leaked key is rotated
///   out), so while the host keeps failing, requests that need them fail as if there were none;
/// - an unknown `kid` refetches at most once per `minimumRefetchInterval`, so forged `kid`s cannot drive fetches;
/// - after a failed fetch nothing is fetched for a back-off (doubling from `initialBackoff` up to
///   `maximumBackoff`): requests use the document they have, or fail at once when there is none. Once a back-off
///   is over, an unknown `kid` may retry at once (the back-off, not the refetch interval, paces a failing host).
package actor JWKSCache {
    package struct Policy: Sendable {
        package var timeToLive: Double = 6 * 3600
        package var maximumAge: Double = 24 * 3600
        package var minimumRefetchInterval: Double = 60
        package var initialBackoff: Double = 1
        package var maximumBackoff: Double = 300

        package init() {}
    }

    package typealias Fetch = @Sendable (_ url: String) async throws -> Data

    private struct Entry {
        var document: JWKSDocument?
        var inFlight: Task<Void, Never>?
        /// When an unknown `kid` last started a fetch.
        var lastKeyIDFetch: Date?
        var consecutiveFailures = 0
        var backoffUntil: Date?
        var lastFailure: String?
    }

    private let policy: Policy
    private let clock: @Sendable () -> Date
    private let fetch: Fetch
    private let logger: Logger
    private var entries: [String: Entry] = [:]

    package init(
        policy: Policy = Policy(), clock: @escaping @Sendable () -> Date, logger: Logger, fetch: @escaping Fetch
    ) {
        self.policy = policy
        self.clock = clock
        self.logger = logger
        self.fetch = fetch
    }

    /// Fetches over HTTP with a deadline over headers and body, and a body bound of 1 MiB.
    package init(
        policy: Policy = Policy(), clock: @escaping @Sendable () -> Date, logger: Logger, httpClient: HTTPClient,
        timeout: TimeAmount = .seconds(10)
    ) {
        // The App Check fetcher is a plain bounded GET, nothing App Check-specific; session keys use it too.
        self.init(policy: policy, clock: clock, logger: logger) { url in
            try await HTTPAppCheckJWKSFetcher(httpClient: httpClient, url: url, timeout: timeout).fetch()
        }
    }

    /// The URL's document. The first call fetches it (or joins the fetch in flight); later calls answer from the
    /// cache at once, starting a background refetch when the document is past its time to live. A document past
    /// its maximum age is as good as none: the call waits for a refetch (or fails at once during a back-off).
    package func document(_ url: String) async throws(JWKSUnavailableError) -> JWKSDocument {
        if let document = usable(entries[url]?.document) {
            if clock().timeIntervalSince(document.fetchedAt) >= policy.timeToLive { _ = startFetchIfAllowed(url) }
            return document
        }
        if let fetch = entries[url]?.inFlight ?? startFetchIfAllowed(url) { await fetch.value }
        guard let document = usable(entries[url]?.document) else {
            let failure = entries[url]?.lastFailure ?? "no document fetched yet"
            let reason =
                entries[url]?.document == nil
                ? failure : "the keys were last confirmed over \(Int(policy.maximumAge)) s ago; \(failure)"
            throw JWKSUnavailableError(url: url, reason: reason)
        }
        return document
    }

    /// Whether keys the host last served at `servedAt` are past the maximum age. A reader that keeps the keys of an
    /// older document, because the newest one has none it can use, asks this of that older document's time: a
    /// host that serves only unusable key sets must not keep withdrawn keys alive.
    package func pastMaximumAge(_ servedAt: Date) -> Bool {
        clock().timeIntervalSince(servedAt) >= policy.maximumAge
    }

    private func usable(_ document: JWKSDocument?) -> JWKSDocument? {
        guard let document, clock().timeIntervalSince(document.fetchedAt) < policy.maximumAge else { return nil }
        return document
    }

    /// What a `kid` that document `generation` lacks may still find.
    package enum Refresh: Sendable {
        /// A newer document: one that already arrived, or the result of a refetch (joined if in flight).
        case newer(JWKSDocument)
        /// Nothing newer can be had now (an unknown `kid` started a fetch less than `minimumRefetchInterval` ago,
        /// or the refetch brought the same keys), and the host answered its latest fetch: the keys are current.
        case current
        /// Nothing newer, and the URL's latest fetch failed (a back-off may be running): the `kid` may be a
        /// rotation the server cannot see yet, not a forgery.
        case hostFailing
    }

    /// A document newer than `generation`, in which a `kid` was not found, or why there is none.
    package func refresh(_ url: String, after generation: Int) async -> Refresh {
        if let document = entries[url]?.document, document.generation > generation { return .newer(document) }
        var fetch = entries[url]?.inFlight
        if fetch == nil {
            let now = clock()
            // While the host is failing, the back-off alone paces the retries (it bounds forged kids as well), so
            // a rotated kid is seen as soon as the host is back, not up to a minute later.
            let hostFailing = (entries[url]?.consecutiveFailures ?? 0) > 0
            let allowed = entries[url]?.lastKeyIDFetch.map {
                now.timeIntervalSince($0) >= policy.minimumRefetchInterval
            }
            if hostFailing || (allowed ?? true), let started = startFetchIfAllowed(url) {
                entries[url]?.lastKeyIDFetch = now
                fetch = started
            }
        }
        if let fetch { await fetch.value }
        if let document = entries[url]?.document, document.generation > generation { return .newer(document) }
        return (entries[url]?.consecutiveFailures ?? 0) > 0 ? .hostFailing : .current
    }

    /// Whole seconds (at least 1) until the back-off of `url`'s failing host ends, when one is running: no fetch of
    /// the URL starts before then, so a request that needs a key set it cannot give waits at least that long.
    package func retryAfterSeconds(for url: String) -> Int? {
        guard let until = entries[url]?.backoffUntil else { return nil }
        let seconds = until.timeIntervalSince(clock())
        guard seconds > 0 else { return nil }
        return max(1, Int(seconds.rounded(.up)))
    }

    /// Starts a fetch unless one is in flight or a back-off is running; returns the fetch in flight either way.
    private func startFetchIfAllowed(_ url: String) -> Task<Void, Never>? {
        let now = clock()
        var entry = entries[url] ?? Entry()
        if let inFlight = entry.inFlight { return inFlight }
        if let until = entry.backoffUntil, now < until { return nil }
        let fetch = self.fetch
        let task = Task {
            let result: Result<Data, any Error>
            do {
                result = .success(try await fetch(url))
            } catch {
                result = .failure(error)
            }
            self.finish(url, result: result, startedAt: now)
        }
        entry.inFlight = task
        entries[url] = entry
        return task
    }

    private func finish(_ url: String, result: Result<Data, any Error>, startedAt: Date) {
        var entry = entries[url] ?? Entry()
        entry.inFlight = nil
        switch result.flatMap(Self.validated) {
        case .success(let data):
            let previous = entry.document
            let generation = previous.map { $0.data == data ? $0.generation : $0.generation + 1 } ?? 1
            entry.document = JWKSDocument(data: data, fetchedAt: startedAt, generation: generation)
            entry.consecutiveFailures = 0
            entry.backoffUntil = nil
            entry.lastFailure = nil
        case .failure(let error):
            entry.consecutiveFailures += 1
            let backoff = min(
                policy.initialBackoff * pow(2, Double(min(entry.consecutiveFailures - 1, 30))), policy.maximumBackoff)
            entry.backoffUntil = clock().addingTimeInterval(backoff)
            entry.lastFailure = String(describing: error)
            logger.warning(
                "JWKS fetch failed; keeping the keys already held",
                metadata: [
                    "url": .string(Self.shown(url)), "error": .string(String(describing: error)),
                    "failures": .stringConvertible(entry.consecutiveFailures),
                    "backoffSeconds": .stringConvertible(backoff),
                ])
        }
        entries[url] = entry
    }

    /// `url` as logs and errors show it: without the credentials (`https://user:secret@host/…`, which AsyncHTTPClient
    /// sends as Basic authentication) or the query a key-set URL may carry.
    package nonisolated static func shown(_ url: String) -> String {
        guard var components = URLComponents(string: url) else { return "the key-set URL" }
        components.user = nil
        components.password = nil
        components.query = nil
        components.fragment = nil
        return components.string ?? "the key-set URL"
    }

    /// A document that is not a JSON object with a non-empty `keys` array is a failed fetch: it must not replace
    /// keys that work. What each key set makes of the keys is its reader's business.
    private static func validated(_ data: Data) -> Result<Data, any Error> {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let keys = object["keys"] as? [Any], !keys.isEmpty
        else {
            return .failure(NotAKeySet())
        }
        return .success(data)
    }

    private struct NotAKeySet: Error, CustomStringConvertible {
        var description: String { "not a JWKS document with keys" }
    }
}
