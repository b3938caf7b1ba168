import ArgumentParser
import Foundation
import HTTPTypes
import OpenAPIRuntime
import StepLedgerClient

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The client SDK from a shell: record buckets into a queue folder, flush them, print the walker's state, and answer
/// a re-read request.
@main
struct StepledgerClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stepledger-client",
        abstract: "A walking app's side of StepLedger, from the command line (the StepLedgerClient package).",
        discussion: """
            Each command opens the queue folder (--store), does its work and exits; the queue survives between \
            commands as it survives an app kill. The session token comes from --token or STEPLEDGER_TOKEN \
            (`stepd token --walker ID` prints one for a test-phase server); --app-check or \
            STEPLEDGER_APP_CHECK adds an App Check token for a production server.
            """,
        subcommands: [Record.self, Flush.self, Status.self, Reread.self]
    )
}

struct ClientOptions: ParsableArguments {
    @Option(help: "The StepLedger server.")
    var server = "http://127.0.0.1:8080"

    @Option(help: "The client's queue folder.")
    var store = "./stepledger-client"

    @Option(help: "The walker's session token (default: $STEPLEDGER_TOKEN).")
    var token: String?

    @Option(help: "An App Check token sent with each ingest (default: $STEPLEDGER_APP_CHECK).")
    var appCheck: String?

    @Option(help: "The app version sent with each bucket.")
    var appVersion = "1.0.0+1"

    func open() throws -> StepLedgerClient {
        guard let url = URL(string: server), url.scheme == "http" || url.scheme == "https" else {
            throw ValidationError("--server must be an http or https URL")
        }
        let environment = ProcessInfo.processInfo.environment
        guard let session = token ?? environment["STEPLEDGER_TOKEN"], !session.isEmpty else {
            throw ValidationError("a session token is needed: --token or STEPLEDGER_TOKEN")
        }
        let appCheckToken = appCheck ?? environment["STEPLEDGER_APP_CHECK"]
        return try StepLedgerClient(
            configuration: .init(
                serverURL: url, storeDirectory: URL(fileURLWithPath: store), appVersion: appVersion),
            credentials: ClosureCredentials(sessionToken: { _ in session }, appCheckToken: { appCheckToken }),
            transport: CrashingTransport.fromEnvironment())
    }
}

struct Record: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Store a day's step count in the queue (with a new idempotency key) and print the bucket.")

    @OptionGroup var options: ClientOptions

    @Option(help: "The day (YYYY-MM-DD) in --tz.")
    var day: String

    @Option(help: "The day's step count so far.")
    var count: Int

    @Option(help: "The IANA zone of the day.")
    var tz = "UTC"

    @Option(help: "HealthKit, HealthConnect or WatchNative.")
    var source = "HealthKit"

    @Option(help: "The source bundle of the samples.")
    var bundle = "com.apple.health"

    @Flag(help: "The system saw no gyroscope samples with the steps.")
    var noGyro = false

    func run() async throws {
        guard let calendarDay = CalendarDay(day) else { throw ValidationError("--day must be YYYY-MM-DD") }
        guard let zone = TimeZone(identifier: tz) else { throw ValidationError("--tz must be an IANA zone") }
        guard let stepSource = StepSource(rawValue: source) else {
            throw ValidationError("--source must be HealthKit, HealthConnect or WatchNative")
        }
        // The samples span the whole day in its zone (23 or 25 hours when the clocks change), up to now for today.
        let interval = calendarDay.interval(in: zone)
        let start = interval.start
        let end = min(interval.end.addingTimeInterval(-1), max(start, Date()))
        let client = try options.open()
        let bucket = try await client.record(
            day: calendarDay, count: count, source: stepSource, timeZone: zone, sampleStart: start, sampleEnd: end,
            sourceBundleId: bundle, gyroSamplesObserved: !noGyro)
        print(
            #"{"recorded":{"idempotencyKey":"\#(bucket.idempotencyKey)","day":"\#(bucket.day)","count":\#(bucket.count)}}"#
        )
    }
}

struct Flush: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send the queued buckets that are due and print what happened to them (one JSON line).")

    @OptionGroup var options: ClientOptions

    func run() async throws {
        let client = try options.open()
        let report = try await client.flush()
        let expired = await client.expiredBuckets()
        var line: [String: Any] = [
            "requests": report.requests,
            "delivered": report.delivered.map { ["idempotencyKey": $0.bucket.idempotencyKey, "day": "\($0.day.day)"] },
            "refused": report.refused.map {
                ["idempotencyKey": $0.bucket.idempotencyKey, "day": "\($0.bucket.day)", "error": "\($0.error)"]
            },
            "expired": report.expired.map { ["idempotencyKey": $0.idempotencyKey, "day": "\($0.day)"] },
            "expiredTotal": expired.total,
            "remaining": report.remaining,
        ]
        if let paused = report.pausedUntil { line["pausedUntil"] = paused.timeIntervalSince1970 }
        if let next = report.nextAttemptAt { line["nextAttemptAt"] = next.timeIntervalSince1970 }
        if let interruption = report.interruption { line["interruption"] = "\(interruption)" }
        let data = try JSONSerialization.data(withJSONObject: line, options: [.sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the walker's state from the server, then each day the client knows and the queue.")

    @OptionGroup var options: ClientOptions

    func run() async throws {
        let client = try options.open()
        let walker = try await client.walker()
        print("walker \(walker.walkerId): \(walker.totalLifetimeSteps) lifetime steps")
        print(
            "streak \(walker.streak.currentLengthDays) days (\(walker.streak.bonusTier)), energy confirmed "
                + "\(walker.energy.confirmed), pending \(walker.energy.pending), spendable \(walker.energy.spendable)")
        for request in walker.rereadRequests {
            print("re-read requested for \(request.day), answer before \(request.deadline)")
        }
        for day in await client.dayStates() {
            let eta = day.reconcileEta.map { ", reconciled at \($0)" } ?? ""
            let accepted = day.acceptedCount.map { ", accepted \($0)" } ?? ""
            print("\(day.day) \(day.status.rawValue): reported \(day.reportedCount)\(accepted)\(eta)")
        }
        let queued = await client.queuedBuckets()
        print("\(queued.count) bucket(s) queued")
        if let paused = await client.pausedUntil() { print("queue paused until \(paused)") }
    }
}

struct Reread: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Answer the walker's open re-read request for a day with a fresh count per source bundle.",
        discussion: """
            Finds the open request for --day in GET /walker, answers it (POST /step/reread) and prints the outcome \
            as one JSON line. Each bundle's samples span an equal share of the request's window (up to now), so \
            no two bundles overlap. The answer is kept in the --store folder until the server's answer to it is \
            read: when no try is answered (or the command is killed meanwhile), running it again for the day sends \
            that same answer under the same idempotency key and prints the outcome, even though the request is no \
            longer open once the server took it.
            """)

    @OptionGroup var options: ClientOptions

    @Option(help: "The day of the open request (YYYY-MM-DD).")
    var day: String

    @Option(
        name: .customLong("count"),
        help: "BUNDLE=COUNT, a source bundle's fresh count of the day; repeat it for each bundle.")
    var counts: [String]

    @Option(help: "A digest of the samples read, kept by the server as evidence.")
    var digest = "stepledger-client"

    @Option(help: "The idempotency key of an earlier answer that went unanswered (kept in --store by default).")
    var idempotencyKey: String?

    func validate() throws {
        guard CalendarDay(day) != nil else { throw ValidationError("--day must be YYYY-MM-DD") }
        guard !counts.isEmpty else { throw ValidationError("at least one --count BUNDLE=COUNT is needed") }
        for count in counts where Self.parse(count) == nil {
            throw ValidationError("--count must be BUNDLE=COUNT with a whole number of steps, not \(count)")
        }
    }

    static func parse(_ text: String) -> (bundle: String, count: Int)? {
        guard let equals = text.lastIndex(of: "="), let count = Int(text[text.index(after: equals)...]) else {
            return nil
        }
        let bundle = String(text[..<equals])
        return bundle.isEmpty ? nil : (bundle, count)
    }

    func run() async throws {
        let client = try options.open()
        let parsed = counts.compactMap(Self.parse)
        let pendingFile = URL(fileURLWithPath: options.store).appendingPathComponent("reread-\(day).json")
        let answer: PendingRereadAnswer
        if let kept = try PendingRereadAnswer.read(pendingFile) {
            // An earlier answer of this day whose outcome was never read: send that same answer again.
            guard kept.counts == Dictionary(parsed.map { ($0.bundle, $0.count) }, uniquingKeysWith: { $1 }) else {
                throw CommandFailure(
                    "an earlier answer for \(day) with other counts awaits its outcome (\(pendingFile.path)); "
                        + "run again with its counts, or delete the file if the request expired")
            }
            if let idempotencyKey, idempotencyKey != kept.idempotencyKey {
                throw CommandFailure("an earlier answer for \(day) awaits its outcome under another key")
            }
            answer = kept
        } else {
            let walker = try await client.walker()
            guard let request = walker.rereadRequests.first(where: { $0.day.description == day }) else {
                throw CommandFailure("no open re-read request for \(day)")
            }
            answer = PendingRereadAnswer(
                request: request, readings: Self.readings(parsed, for: request, now: Date()), digest: digest,
                idempotencyKey: idempotencyKey ?? UUID().uuidString)
            // Kept before it is sent: a run killed after the server took the answer can still learn its outcome.
            try answer.write(pendingFile)
        }
        let outcome: RereadOutcome
        do {
            outcome = try await client.answerReread(
                answer.request, readings: answer.readings, sampleDigest: answer.digest,
                idempotencyKey: answer.idempotencyKey)
        } catch StepLedgerError.rereadUnanswered(let key, let last) {
            throw CommandFailure(
                "no try of the answer was answered (\(last)); run the command again to learn the outcome (key \(key))")
        } catch let error as StepLedgerError where Self.isFinal(error) {
            try? FileManager.default.removeItem(at: pendingFile)
            throw error
        }
        try? FileManager.default.removeItem(at: pendingFile)
        var line: [String: Any] = [
            "requestId": outcome.requestId, "day": "\(outcome.day.day)", "status": outcome.day.status.rawValue,
            "outcome": outcome.isAccepted ? "ACCEPTED" : "QUARANTINED",
            "reportedCount": outcome.day.reportedCount, "reasons": outcome.day.reasons,
        ]
        if let accepted = outcome.day.acceptedCount { line["acceptedCount"] = accepted }
        let data = try JSONSerialization.data(withJSONObject: line, options: [.sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    }
}

extension Reread {
    /// One reading per bundle, each spanning an equal share of the request's window up to `now`, so none overlap.
    static func readings(_ parsed: [(bundle: String, count: Int)], for request: WalkerState.RereadRequest, now: Date)
        -> [RereadReading]
    {
        let end = min(request.windowEnd.addingTimeInterval(-1), max(request.windowStart, now))
        let share = end.timeIntervalSince(request.windowStart) / Double(parsed.count)
        return parsed.enumerated().map { index, entry in
            let start = request.windowStart.addingTimeInterval((share * Double(index)).rounded(.down))
            let last = index == parsed.count - 1 ? end : start.addingTimeInterval(max(0, share.rounded(.down) - 1))
            return RereadReading(sourceBundleId: entry.bundle, count: entry.count, sampleStart: start, sampleEnd: last)
        }
    }

    /// An error after which sending the same answer again cannot help: the server refused it (or its request is
    /// gone), so the kept answer is dropped.
    static func isFinal(_ error: StepLedgerError) -> Bool {
        switch error {
        case .rereadRefused, .invalidRequest, .walkerSuspended, .idempotencyKeyReused: true
        default: false
        }
    }
}

/// An answer to a re-read request, kept in the client's folder from before it is sent until its outcome is read.
struct PendingRereadAnswer: Codable {
    var request: WalkerState.RereadRequest
    var readings: [RereadReading]
    var digest: String
    var idempotencyKey: String

    var counts: [String: Int] {
        readings.reduce(into: [:]) { $0[$1.sourceBundleId] = $1.count }
    }

    static func read(_ file: URL) throws -> PendingRereadAnswer? {
        guard let data = FileManager.default.contents(atPath: file.path) else { return nil }
        do {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .secondsSince1970
            return try decoder.decode(PendingRereadAnswer.self, from: data)
        } catch {
            throw CommandFailure("\(file.path) is not a kept re-read answer; delete it to start again")
        }
    }

    /// Written whole (Foundation's atomic write: a temporary file renamed over the name), so a killed run leaves the
    /// old file or the new one, never half of one.
    func write(_ file: URL) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = [.sortedKeys]
        try FileManager.default.createDirectory(
            at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try encoder.encode(self).write(to: file, options: .atomic)
    }
}

/// A refusal that is not about the command line: printed as one line, exit status 1, no usage text.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }
}

/// For the client crash tests: with `STEPLEDGER_CLIENT_CRASH_AFTER_ANSWER=p`, each request's answer kills the
/// process with SIGKILL with probability p after the server has answered and before the client reads the answer,
/// the moment when a committed bucket's acknowledgement is lost. `STEPLEDGER_CLIENT_CRASH_OPERATIONS` (operation
/// ids, comma-separated, e.g. `answerReread`) limits it to those requests.
struct CrashingTransport: ClientTransport {
    let base: any ClientTransport
    let probability: Double
    let operations: Set<String>?

    static func fromEnvironment() -> (any ClientTransport)? {
        let environment = ProcessInfo.processInfo.environment
        guard let text = environment["STEPLEDGER_CLIENT_CRASH_AFTER_ANSWER"], let probability = Double(text),
            probability > 0
        else { return nil }
        let operations = environment["STEPLEDGER_CLIENT_CRASH_OPERATIONS"].map {
            Set($0.split(separator: ",").map(String.init))
        }
        return CrashingTransport(
            base: StepLedgerClient.platformTransport(), probability: probability, operations: operations)
    }

    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (
        HTTPResponse, HTTPBody?
    ) {
        let answer = try await base.send(request, body: body, baseURL: baseURL, operationID: operationID)
        if operations?.contains(operationID) ?? true, Double.random(in: 0..<1) < probability { kill(getpid(), SIGKILL) }
        return answer
    }
}
