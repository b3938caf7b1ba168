import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import SQLKit
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

@testable import StepAPI

/// The error middleware each surface's route group carries, and the answers the surfaces share through it.
@Suite("Surface error middleware")
struct SurfaceErrorTests {
    struct Unexpected: Error {}

    /// A router with one group behind `SurfaceErrorMiddleware<Failure>` whose routes throw what they are told.
    static func router<Failure: SurfaceError>(
        _: Failure.Type, logger: Logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    ) -> Router<AppRequestContext> {
        let router = Router(context: AppRequestContext.self)
        let group = router.group().add(middleware: SurfaceErrorMiddleware<Failure>(logger: logger))
        group.get("/unexpected") { _, _ -> Response in throw Unexpected() }
        group.get("/privilege") { _, _ -> Response in
            throw StoreError.invalidConfiguration("PostgreSQL SQLSTATE 42501: permission denied for table walkers")
        }
        group.get("/outage") { _, _ -> Response in throw StoreError.unavailable("the database is away") }
        group.get("/lock-wait") { _, _ -> Response in
            throw StoreError.lockTimeout("PostgreSQL SQLSTATE 55P03: canceling statement due to lock timeout")
        }
        group.get("/own") { _, _ -> Response in throw Failure.sessionRefused(reason: "TOKEN_EXPIRED") }
        return router
    }

    @Test("anything unexpected is a 500 in the surface's envelope that reveals nothing")
    func unexpectedIsHidden() async throws {
        let ingest = Application(router: Self.router(IngestAPIError.self))
        try await ingest.test(.router) { client in
            let response = try await client.execute(uri: "/unexpected", method: .get)
            #expect(response.status == .internalServerError)
            #expect(try response.json["error"] == .string("INTERNAL_ERROR"))
            #expect(!String(buffer: response.body).contains("Unexpected"))
        }
        let health = Application(router: Self.router(HealthAPIError.self))
        try await health.test(.router) { client in
            let response = try await client.execute(uri: "/unexpected", method: .get)
            #expect(response.status == .internalServerError)
            #expect(try response.json["statusCode"] == .int(500))
            #expect(try response.json["error"] == .string("Internal Server Error"))
        }
    }

    @Test(
        "a 500's log line names only the error's type, except a privilege or setting the operator must mend, said in full"
    )
    func failureLogged() async throws {
        let capture = LogCapture()
        let app = Application(router: Self.router(IngestAPIError.self, logger: capture.logger()))
        try await app.test(.router) { client in
            let unexpected = try await client.execute(uri: "/unexpected", method: .get)
            let privilege = try await client.execute(uri: "/privilege", method: .get)
            #expect(unexpected.status == .internalServerError && privilege.status == .internalServerError)
            #expect(!String(buffer: privilege.body).contains("42501"), "the client hears nothing of it")
        }
        let failed = capture.all.filter { $0.contains("request failed") }
        #expect(failed.count == 2)
        #expect(failed.first?.contains("Unexpected") == true)
        #expect(failed.last?.contains("SQLSTATE 42501: permission denied for table walkers") == true, "\(failed)")
    }

    @Test(
        "a store outage, or a lock wait past a role's lock_timeout, is the surface's 503; its own 401 carries WWW-Authenticate"
    )
    func outageAndChallenge() async throws {
        let admin = Application(router: Self.router(AdminAPIError.self))
        try await admin.test(.router) { client in
            for path in ["/outage", "/lock-wait"] {
                let outage = try await client.execute(uri: path, method: .get)
                #expect(outage.status == .serviceUnavailable, "\(path)")
                #expect(try outage.json["error"] == .string("SERVICE_UNAVAILABLE"), "\(path)")
            }
            let own = try await client.execute(uri: "/own", method: .get)
            #expect(own.status == .unauthorized)
            #expect(own.headers[.wwwAuthenticate] == "Bearer")
        }
    }

    @Test("an unknown path under /health is 404 in seed 002's envelope; elsewhere the router's 404 stays")
    func healthNotFound() async throws {
        let harness = try await TestHarness.make()
        try await harness.run { client in
            let response = try await client.execute(uri: "/health/nothing", method: .get)
            #expect(response.status == .notFound)
            #expect(try response.json["statusCode"] == .int(404))
            #expect(try response.json["error"] == .string("Not Found"))
            let elsewhere = try await client.execute(uri: "/walker/nothing", method: .get)
            #expect(elsewhere.status == .notFound)
            #expect((try? elsewhere.json["statusCode"]) == nil, "only /health answers in seed 002's envelope")
        }
    }

    @Test("a store outage on the health surface is 503 with the one Retry-After every surface gives")
    func healthOutageRetryAfter() async throws {
        let harness = try await TestHarness.make(kind: .sqlite)
        let token = try await harness.token(for: "walker-health-outage")
        try await harness.run { client in
            try await harness.store.withoutTransaction { try await $0.sql.raw("PRAGMA query_only = ON").run() }
            let response = try await client.execute(
                uri: "/health/attestation-nonce", method: .get, headers: [.authorization: "Bearer \(token)"])
            try await harness.store.withoutTransaction { try await $0.sql.raw("PRAGMA query_only = OFF").run() }
            #expect(response.status == .serviceUnavailable)
            #expect(response.headers[.retryAfter] == RequestLogMiddleware.unavailableRetryAfterSeconds)
            #expect(try response.json["statusCode"] == .int(503))
        }
    }
}
