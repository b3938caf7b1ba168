import Foundation
import StepLedgerClient

/// Records today's steps into a queue folder and, with `--flush`, sends them to a StepLedger server.
///
///     swift run ClientApp [--server URL] [--store DIR] [--flush]   (STEPLEDGER_TOKEN holds the session token)
@main
struct ClientApp {
    static func main() async throws {
        let arguments = CommandLine.arguments
        func option(_ name: String) -> String? {
            arguments.firstIndex(of: name).flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }
        }
        let server = URL(string: option("--server") ?? "http://127.0.0.1:8080")!
        let store = URL(fileURLWithPath: option("--store") ?? NSTemporaryDirectory() + "client-app-queue")

        let client = try StepLedgerClient(
            configuration: .init(serverURL: server, storeDirectory: store, appVersion: "1.0.0+1"),
            credentials: ClosureCredentials(sessionToken: { _ in
                ProcessInfo.processInfo.environment["STEPLEDGER_TOKEN"] ?? ""
            }))

        let now = Date()
        let zone = TimeZone.current
        let today = CalendarDay(containing: now, in: zone)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let bucket = try await client.record(
            day: today, count: 8_421, source: .healthKit, timeZone: zone, sampleStart: calendar.startOfDay(for: now),
            sampleEnd: now, sourceBundleId: "com.apple.health", gyroSamplesObserved: true)
        print("queued \(bucket.count) steps for \(today) under key \(bucket.idempotencyKey)")

        if arguments.contains("--flush") {
            let report = try await client.flush()
            for delivered in report.delivered {
                print("\(delivered.day.day): \(delivered.day.status.rawValue), \(delivered.day.reportedCount) steps")
            }
            for refused in report.refused { print("refused: \(refused.error)") }
            print("\(report.remaining) bucket(s) still queued")
        }
    }
}
