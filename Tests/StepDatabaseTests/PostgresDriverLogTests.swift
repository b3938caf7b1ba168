import Foundation
import Logging
import SQLKit
import StepTestSupport
import Testing

@testable import StepDatabase

/// What the PostgreSQL driver may write to the service's log: at `trace` PostgresNIO writes every message it
/// receives, rows included, so the database hands it a logger that never goes below `info`.
@Suite("PostgreSQL driver logging")
struct PostgresDriverLogTests {
    @Test("the driver's logger is never below info, whatever the service's level")
    func clamped() {
        for level in Logger.Level.allCases {
            var logger = Logger(label: "test")
            logger.logLevel = level
            #expect(PostgreSQLDatabase.driverLogger(logger).logLevel == max(level, .info))
        }
    }

    @Test(
        "with the service's log at trace, no row the database returns reaches the log",
        .enabled(if: TestDatabases.postgresURL != nil))
    func rowsStayOutOfTheLog() async throws {
        let url = try #require(TestDatabases.postgresURL)
        let lines = LogCapture()
        let database = try PostgreSQLDatabase.open(url: url, settings: PostgresSettings(), logger: lines.logger())
        let canary = "canary-\(UUID().uuidString)"
        let read = try await database.transaction { sql in
            try await sql.raw("SELECT \(bind: canary) AS value, 31337 AS count").first()?
                .decode(column: "value", as: String.self)
        }
        #expect(read == canary)
        try await database.close()
        let hex = Array(canary.utf8).map { String(format: "%02x", $0) }.joined()
        for line in lines.all {
            #expect(!line.contains(canary) && !line.contains(hex), "\(line)")
        }
        #expect(!lines.all.contains { $0.hasPrefix("trace") || $0.hasPrefix("debug") })
    }
}
