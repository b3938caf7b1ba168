import Foundation
import HTTPTypes
import OpenAPIRuntime
import Synchronization
import Testing

@testable import StepLedgerClient

/// A clock the tests move by hand.
final class ManualClock: Sendable {
    private let current: Mutex<Date>

    init(_ start: Date) { current = Mutex(start) }

    var now: Date { current.withLock { $0 } }

    func advance(_ seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// What the scripted server does with one bucket (or a whole request).
enum Script: Sendable, Equatable {
    /// Commit the bucket and answer 200 (a replay answers the stored 200).
    case accept
    /// Commit the bucket, then fail the connection before the answer arrives.
    case commitThenDrop
    /// Answer the whole request 503 without committing.
    case unavailable(retryAfter: Int?)
    /// Answer the whole request 429 with Retry-After.
    case rateLimited(retryAfter: Int)
    /// This bucket's result is 409 IDEMPOTENCY_IN_FLIGHT.
    case inFlight
    /// This bucket's result is 500.
    case serverError
    /// This bucket's result is 503 SERVICE_UNAVAILABLE (the server's database went away mid-batch).
    case bucketUnavailable
    /// This bucket's result is 422 STEP_REJECTED with the reasons.
    case reject([String])
    /// This bucket's result is 403 STEP_SOURCE_NOT_WHITELISTED.
    case notWhitelisted
    /// This bucket's result is 413 PAYLOAD_TOO_LARGE (spelt in more than the server's body limit).
    case bucketTooLarge
    /// The whole request is answered 401.
    case unauthorized
    /// The whole request is answered 401 with this `details.reason` (an App Check refusal).
    case unauthorizedFor(String)
    /// This bucket's result is 403 WALKER_SUSPENDED.
    case suspended
    /// The whole request is 413 while it carries more than one bucket (one alone goes on to the bucket scripts).
    case tooLargeUnlessAlone
    /// The whole request is 400, as a malformed body is.
    case malformed
    /// This bucket's result is 429 RATE_LIMITED with details.retryAfterSeconds (the limit ran out mid-batch).
    case bucketRateLimited(retryAfter: Int)
    /// This bucket's result is 400 INVALID_REQUEST (a field the server refuses, as it would alone).
    case bucketInvalid
    /// The request never reaches the server.
    case offline
    /// A proxy or gateway answers the whole request with this status and an HTML page (`Retry-After` as given;
    /// `pause` is the wait it means, for the server's checks).
    case proxy(status: Int, retryAfter: String?, pause: TimeInterval?)
}

/// A scripted `POST /step/ingest:batch` (and `GET /walker`…) server that checks the client's promises as requests
/// arrive: nothing before its retry time, one payload per key, one request per key in flight.
final class FakeServer: ClientTransport, Sendable {
    struct Sent: Sendable {
        var at: Date
        var keys: [String]
        /// The keys this request failed for (the client must back them off).
        var failed: Set<String> = []
        /// The whole queue must pause this long after the request.
        var pause: TimeInterval?
    }

    struct State: Sendable {
        var committed: [String: Data] = [:]
        /// The highest committed count per day.
        var dayCounts: [String: Int] = [:]
        /// Every payload seen per key (must all be equal).
        var payloads: [String: Data] = [:]
        var inFlight: [String: Int] = [:]
        var violations: [String] = []
        var sent: [Sent] = []
        var tokens: [String] = []
        var appChecks: [String?] = []
        var script: @Sendable (_ key: String?, _ attempt: Int) -> Script = { _, _ in .accept }
        var attempts: [String: Int] = [:]
        var extraRoutes: [String: @Sendable (HTTPRequest) -> (HTTPResponse, HTTPBody?)] = [:]
        var bodyRoutes: [String: @Sendable (HTTPRequest, Data) throws -> (HTTPResponse, HTTPBody?)] = [:]
        /// `GET /livez` requests (the client reading the server's clock), and whether their answer has a `Date`.
        var clockReads = 0
        var sendsDate = true
    }

    static func httpDate(_ instant: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: instant)
    }

    let clock: ManualClock
    let state = Mutex(State())

    init(clock: ManualClock) { self.clock = clock }

    func script(_ script: @escaping @Sendable (_ key: String?, _ attempt: Int) -> Script) {
        state.withLock { $0.script = script }
    }

    func route(_ operationID: String, _ answer: @escaping @Sendable (HTTPRequest) -> (HTTPResponse, HTTPBody?)) {
        state.withLock { $0.extraRoutes[operationID] = answer }
    }

    /// A route that sees the request's body too, and may throw (a request that never reaches the server).
    func route(
        _ operationID: String,
        withBody answer: @escaping @Sendable (HTTPRequest, Data) throws -> (HTTPResponse, HTTPBody?)
    ) {
        state.withLock { $0.bodyRoutes[operationID] = answer }
    }

    /// Answers `GET /step/days` with `day` ACCEPTED at `count`, holding the answer's body until `release`: the read
    /// has left (`waitUntilAsked`) and its answer comes back only when the test says, after what it does meanwhile.
    func holdDaysRead(day: CalendarDay, accepted count: Int) -> HeldAnswer {
        let held = HeldAnswer()
        route("listStepDays") { _ in
            held.asked.withLock { $0 = true }
            let json =
                #"{"days":[{"day":"\#(day)","reportedCount":\#(count),"acceptedCount":\#(count),"reconciliationStatus":"ACCEPTED","energyCredited":\#(count)}]}"#
            return held.answer(Data(json.utf8))
        }
        return held
    }

    /// Answers the next `POST /step/ingest:batch` with a 500 result for each of its buckets, committing none, and
    /// holds the answer's body until `release`: the request is on its way (`waitUntilAsked`) while the test does
    /// what it does meanwhile. The keys it carried are in `heldKeys`; later requests go to the scripted server.
    func holdIngestFailing() -> HeldAnswer {
        let held = HeldAnswer()
        route(
            "ingestStepBatch",
            withBody: { _, bytes in
                let object = try JSONSerialization.jsonObject(with: bytes) as? [String: Any]
                let keys = (object?["buckets"] as? [[String: Any]] ?? []).map { $0["idempotencyKey"] as? String ?? "" }
                held.keys.withLock { $0 = keys }
                self.state.withLock { $0.bodyRoutes["ingestStepBatch"] = nil }
                held.asked.withLock { $0 = true }
                let results = keys.map { Self.error($0, 500, "INTERNAL_ERROR", [:]) }
                return held.answer(try JSONSerialization.data(withJSONObject: ["results": results]))
            })
        return held
    }

    /// An answer held back (`holdDaysRead`, `holdIngestFailing`).
    final class HeldAnswer: Sendable {
        let keys = Mutex<[String]>([])
        var heldKeys: [String] { keys.withLock { $0 } }
        let asked = Mutex(false)
        let gate: AsyncStream<Void>
        private let opener: AsyncStream<Void>.Continuation

        init() { (gate, opener) = AsyncStream.makeStream(of: Void.self) }

        func waitUntilAsked() async { while !asked.withLock({ $0 }) { await Task.yield() } }

        func release() { opener.yield() }

        /// A 200 whose JSON body `json` comes only after `release`.
        func answer(_ json: Data) -> (HTTPResponse, HTTPBody?) {
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "application/json"
            let gate = self.gate
            let body = AsyncStream<ArraySlice<UInt8>> { continuation in
                Task {
                    for await _ in gate { break }
                    continuation.yield(ArraySlice(json))
                    continuation.finish()
                }
            }
            return (response, HTTPBody(body, length: .unknown, iterationBehavior: .single))
        }
    }

    var violations: [String] { state.withLock { $0.violations } }
    var committed: [String: Data] { state.withLock { $0.committed } }
    var dayCounts: [String: Int] { state.withLock { $0.dayCounts } }
    var sent: [Sent] { state.withLock { $0.sent } }

    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (
        HTTPResponse, HTTPBody?
    ) {
        if operationID == "getLiveness" {
            // The server's clock, asked by a client whose queue holds a day past the offline cap by its own.
            let (offline, date) = state.withLock { server in
                server.clockReads += 1
                return (server.script(nil, (server.attempts["*"] ?? 0) + 1) == .offline, server.sendsDate)
            }
            if offline { throw URLError(.notConnectedToInternet) }
            var response = HTTPResponse(status: .ok)
            if date { response.headerFields[.date] = Self.httpDate(clock.now) }
            return (response, HTTPBody(#"{"status":"ok"}"#))
        }
        let token = request.headerFields[.authorization] ?? ""
        let appCheck = request.headerFields[HTTPField.Name("X-Firebase-AppCheck")!]
        state.withLock {
            $0.tokens.append(token)
            $0.appChecks.append(appCheck)
        }
        if let route = state.withLock({ $0.extraRoutes[operationID] }) { return route(request) }
        if let route = state.withLock({ $0.bodyRoutes[operationID] }) {
            var bytes = Data()
            if let body { bytes = try await Data(collecting: body, upTo: 10_000_000) }
            return try route(request, bytes)
        }
        guard operationID == "ingestStepBatch", let body else { return (HTTPResponse(status: .notFound), nil) }
        let bytes = try await Data(collecting: body, upTo: 10_000_000)
        let object = try JSONSerialization.jsonObject(with: bytes) as? [String: Any]
        let buckets = object?["buckets"] as? [[String: Any]] ?? []
        let keys = buckets.map { $0["idempotencyKey"] as? String ?? "" }
        let now = clock.now
        let canonicals = try buckets.map { try JSONSerialization.data(withJSONObject: $0, options: [.sortedKeys]) }
        state.withLock { server in
            server.sent.append(Sent(at: now, keys: keys))
            for (key, canonical) in zip(keys, canonicals) {
                if let earlier = server.payloads[key], earlier != canonical {
                    server.violations.append("key \(key) came back with another payload")
                }
                server.payloads[key] = canonical
                server.inFlight[key, default: 0] += 1
                if server.inFlight[key]! > 1 { server.violations.append("key \(key) was in flight twice") }
            }
        }
        // Let other tasks run while the request is "on the wire".
        await Task.yield()
        defer { state.withLock { server in for key in keys { server.inFlight[key, default: 1] -= 1 } } }

        let wholeScript = state.withLock { server -> Script in
            let attempt = (server.attempts["*"] ?? 0) + 1
            server.attempts["*"] = attempt
            return server.script(nil, attempt)
        }
        func mark(failed: Set<String>, pause: TimeInterval? = nil) {
            state.withLock { server in
                guard let index = server.sent.lastIndex(where: { $0.keys == keys && $0.at == now }) else { return }
                server.sent[index].failed = failed
                server.sent[index].pause = pause
            }
        }
        switch wholeScript {
        case .offline:
            mark(failed: Set(keys))
            throw URLError(.notConnectedToInternet)
        case .unauthorized: return try Self.json(401, ["error": "UNAUTHORIZED", "message": "no", "details": [:]])
        case .proxy(let status, let retryAfter, let pause):
            mark(failed: pause == nil && status != 401 ? Set(keys) : [], pause: pause)
            return Self.page(status, retryAfter: retryAfter)
        case .unauthorizedFor(let reason):
            return try Self.json(401, ["error": "UNAUTHORIZED", "message": "no", "details": ["reason": reason]])
        case .tooLargeUnlessAlone where keys.count > 1:
            return try Self.json(413, ["error": "PAYLOAD_TOO_LARGE", "message": "big", "details": [:]])
        case .malformed:
            return try Self.json(400, ["error": "INVALID_REQUEST", "message": "bad body", "details": [:]])
        case .rateLimited(let retryAfter):
            mark(failed: [], pause: TimeInterval(retryAfter))
            var response = HTTPResponse(status: .tooManyRequests)
            response.headerFields[.retryAfter] = "\(retryAfter)"
            return try Self.json(429, ["error": "RATE_LIMITED", "message": "slow", "details": [:]], response: response)
        case .unavailable(let retryAfter):
            mark(failed: retryAfter == nil ? Set(keys) : [], pause: retryAfter.map(TimeInterval.init))
            var response = HTTPResponse(status: .serviceUnavailable)
            if let retryAfter { response.headerFields[.retryAfter] = "\(retryAfter)" }
            return try Self.json(
                503, ["error": "SERVICE_UNAVAILABLE", "message": "later", "details": [:]], response: response)
        default: break
        }

        var results: [[String: Any]] = []
        var dropAfterCommit = false
        var failedKeys: Set<String> = []
        for (key, bucket) in zip(keys, buckets) {
            let script = state.withLock { server -> Script in
                let attempt = (server.attempts[key] ?? 0) + 1
                server.attempts[key] = attempt
                return server.committed[key] != nil ? .accept : server.script(key, attempt)
            }
            let day = bucket["day"] as? String ?? ""
            let count = bucket["count"] as? Int ?? 0
            // The server's offline cap, by its own clock in the bucket's zone, before anything else.
            if let calendarDay = CalendarDay(day), let zone = TimeZone(identifier: bucket["tz"] as? String ?? ""),
                CalendarDay(containing: now, in: zone).days(since: calendarDay) > 7
            {
                results.append(
                    Self.error(key, 422, "STEP_REJECTED", ["reasons": ["OFFLINE_CAP_EXCEEDED"], "day": day]))
                continue
            }
            switch script {
            case .accept, .commitThenDrop:
                let highest = state.withLock { server -> Int in
                    if server.committed[key] == nil {
                        server.committed[key] = server.payloads[key]
                        server.dayCounts[day] = max(server.dayCounts[day] ?? 0, count)
                    }
                    return server.dayCounts[day] ?? count
                }
                if script == .commitThenDrop { dropAfterCommit = true }
                results.append([
                    "idempotencyKey": key, "status": 200,
                    "body": Self.ingestResponse(day: day, reported: highest),
                ])
            case .inFlight:
                failedKeys.insert(key)
                results.append(Self.error(key, 409, "IDEMPOTENCY_IN_FLIGHT", [:]))
            case .serverError:
                failedKeys.insert(key)
                results.append(Self.error(key, 500, "INTERNAL_ERROR", [:]))
            case .bucketUnavailable:
                failedKeys.insert(key)
                results.append(Self.error(key, 503, "SERVICE_UNAVAILABLE", [:]))
            case .reject(let reasons):
                results.append(Self.error(key, 422, "STEP_REJECTED", ["reasons": reasons, "day": day]))
            case .notWhitelisted:
                results.append(Self.error(key, 403, "STEP_SOURCE_NOT_WHITELISTED", ["sourceBundleId": "x"]))
            case .suspended:
                results.append(Self.error(key, 403, "WALKER_SUSPENDED", [:]))
            case .bucketTooLarge:
                results.append(Self.error(key, 413, "PAYLOAD_TOO_LARGE", ["limitBytes": 16_384]))
            case .bucketRateLimited(let retryAfter):
                results.append(Self.error(key, 429, "RATE_LIMITED", ["retryAfterSeconds": retryAfter]))
            case .bucketInvalid:
                results.append(Self.error(key, 400, "INVALID_REQUEST", ["fields": ["tz": "unknown zone"]]))
            default:
                failedKeys.insert(key)
                results.append(Self.error(key, 500, "INTERNAL_ERROR", [:]))
            }
        }
        if dropAfterCommit {
            mark(failed: Set(keys))
            throw URLError(.networkConnectionLost)
        }
        mark(failed: failedKeys)
        return try Self.json(200, ["results": results])
    }

    /// Every request that came before the client's promised time: inside a pause, or a key sent again sooner than
    /// the least backoff its failures in a row allow under `policy`.
    func timingViolations(policy: RetryPolicy) -> [String] {
        var violations: [String] = []
        var pausedUntil = Date.distantPast
        var failures: [String: (count: Int, at: Date)] = [:]
        for request in sent {
            if request.at < pausedUntil {
                violations.append("a request at \(request.at) inside a pause to \(pausedUntil)")
            }
            for key in request.keys {
                if let failure = failures[key] {
                    let least =
                        min(policy.maximumDelay, policy.initialDelay * pow(2, Double(failure.count - 1)))
                        * (1 - policy.jitter)
                    if request.at < failure.at.addingTimeInterval(least) {
                        violations.append(
                            "key \(key) again after \(request.at.timeIntervalSince(failure.at)) s, failure \(failure.count)"
                        )
                    }
                }
            }
            for key in request.failed { failures[key] = ((failures[key]?.count ?? 0) + 1, request.at) }
            if let pause = request.pause { pausedUntil = max(pausedUntil, request.at.addingTimeInterval(pause)) }
        }
        return violations
    }

    static func ingestResponse(day: String, reported: Int) -> [String: Any] {
        [
            "accepted": true, "provisional": true, "provisionalEnergy": reported,
            "stepLog": [
                "day": day, "reportedCount": reported, "acceptedCount": NSNull(), "reconciliationStatus": "PENDING",
            ],
            "streakState": ["currentLengthDays": 0, "bonusTier": "T0_NONE"],
            "walker": ["totalLifetimeSteps": 0, "currentRegionId": "region.plenny"],
            "reconcileEta": "2026-05-18T20:43:30Z",
        ]
    }

    static func error(_ key: String, _ status: Int, _ code: String, _ details: [String: Any]) -> [String: Any] {
        ["idempotencyKey": key, "status": status, "body": ["error": code, "message": code, "details": details]]
    }

    /// A proxy's answer: an HTML page, not the server's JSON.
    static func page(_ status: Int, retryAfter: String?) -> (HTTPResponse, HTTPBody?) {
        var response = HTTPResponse(status: .init(code: status))
        response.headerFields[.contentType] = "text/html"
        if let retryAfter { response.headerFields[.retryAfter] = retryAfter }
        return (response, HTTPBody("<html><body>\(status)</body></html>"))
    }

    static func json(_ status: Int, _ object: Any, response: HTTPResponse? = nil) throws -> (HTTPResponse, HTTPBody?) {
        var response = response ?? HTTPResponse(status: .init(code: status))
        response.headerFields[.contentType] = "application/json"
        let data = try JSONSerialization.data(withJSONObject: object)
        return (response, HTTPBody(data))
    }
}

/// Credentials that count their calls and hand out a new token after each refresh; with `freshAppCheck`, a new App
/// Check token on every call (`ac-1`, `ac-2`, …), as a limited-use provider does.
final class CountingCredentials: StepLedgerCredentials {
    let refreshes = Mutex(0)
    let appCheckCalls = Mutex(0)
    let appCheck: String?
    let freshAppCheck: Bool
    /// While set, the session token provider fails (offline, with a token that has expired).
    let sessionFails = Mutex(false)

    init(appCheck: String? = nil, freshAppCheck: Bool = false) {
        self.appCheck = appCheck
        self.freshAppCheck = freshAppCheck
    }

    func sessionToken(refresh: Bool) async throws -> String {
        if sessionFails.withLock({ $0 }) { throw URLError(.notConnectedToInternet) }
        let generation = refreshes.withLock { count -> Int in
            if refresh { count += 1 }
            return count
        }
        return "token-\(generation)"
    }

    func appCheckToken() async throws -> String? {
        let call = appCheckCalls.withLock { count -> Int in
            count += 1
            return count
        }
        return freshAppCheck ? "ac-\(call)" : appCheck
    }
}

/// Holds every request for a minute (until its task is cancelled) before the server sees it, while `stalls` is set.
final class StallingTransport: ClientTransport, Sendable {
    let server: FakeServer
    let stalls = Mutex(true)
    /// Whether a stalled request cancelled by its caller is answered all the same (the answer was on its way), or
    /// throws as a transport does that gives up.
    let answersWhenCancelled: Bool
    /// How many requests have reached the transport.
    let entered = Mutex(0)

    init(server: FakeServer, answersWhenCancelled: Bool = false) {
        self.server = server
        self.answersWhenCancelled = answersWhenCancelled
    }

    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (
        HTTPResponse, HTTPBody?
    ) {
        entered.withLock { $0 += 1 }
        if stalls.withLock({ $0 }) {
            do {
                try await Task.sleep(for: .seconds(60))
            } catch {
                if !answersWhenCancelled { throw error }
            }
        }
        return try await server.send(request, body: body, baseURL: baseURL, operationID: operationID)
    }
}
