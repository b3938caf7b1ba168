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

/// The client SDK from a shell: record buckets into a queue folder, flush them, and print the walker's state.
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
        subcommands: [Record.self, Flush.self, Status.self]
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

/// For the client crash test: with `STEPLEDGER_CLIENT_CRASH_AFTER_ANSWER=p`, each request's answer kills the
/// process with SIGKILL with probability p after the server has answered and before the client reads the answer,
/// the moment when a committed bucket's acknowledgement is lost.
struct CrashingTransport: ClientTransport {
    let base: any ClientTransport
    let probability: Double

    static func fromEnvironment() -> (any ClientTransport)? {
        guard let text = ProcessInfo.processInfo.environment["STEPLEDGER_CLIENT_CRASH_AFTER_ANSWER"],
            let probability = Double(text), probability > 0
        else { return nil }
        return CrashingTransport(base: StepLedgerClient.platformTransport(), probability: probability)
    }

    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (
        HTTPResponse, HTTPBody?
    ) {
        let answer = try await base.send(request, body: body, baseURL: baseURL, operationID: operationID)
        if Double.random(in: 0..<1) < probability { kill(getpid(), SIGKILL) }
        return answer
    }
}
