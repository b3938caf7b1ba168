// swift-tools-version: 6.2
import PackageDescription

// Warnings are errors through a setting SwiftPM drops for a package used as a dependency (never unsafeFlags, which
// would stop an app from depending on StepLedgerClient by version).
let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .treatAllWarnings(as: .error),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "StepLedger",
    // The client's floor. The server targets are built and tested on Linux; on macOS they need macOS 15.
    platforms: [.macOS(.v12), .iOS(.v15)],
    products: [
        // What a walking app adds: the client SDK alone, without the server's dependencies.
        .library(name: "StepLedgerClient", targets: ["StepLedgerClient"]),
        .executable(name: "stepd", targets: ["stepd"]),
        .executable(name: "stepbench", targets: ["stepbench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/vapor/sql-kit", from: "3.36.0"),
        .package(url: "https://github.com/vapor/sqlite-kit", from: "4.5.2"),
        .package(url: "https://github.com/vapor/sqlite-nio", from: "1.13.2"),
        .package(url: "https://github.com/vapor/postgres-kit", from: "2.17.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.7.1"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-openapi-urlsession", from: "1.4.0"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client", from: "1.5.0"),
    ],
    targets: [
        .target(
            name: "StepCore",
            swiftSettings: strict
        ),
        // The engine plumbing: the SQLite connection, its thread and group commit; the PostgreSQL pool, its
        // unit-of-work database and prepared statements. Outside it, only the `Database` protocol is seen.
        // OpenTelemetry tracing: the tracer, its OTLP/HTTP exporter, traceparent in and out (nothing of ours).
        .target(
            name: "StepTracing",
            dependencies: [
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "StepDatabase",
            dependencies: [
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "SQLiteKit", package: "sqlite-kit"),
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "PostgresKit", package: "postgres-kit"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // Its `ConnectionPoolError` reaches callers unmapped (the circuit breaker's refusal).
                .product(name: "_ConnectionPoolModule", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        // Structured (JSON) log lines off the caller's thread, for the server and the worker alike.
        .target(
            name: "StepLogging",
            dependencies: [
                "StepCore",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "StepStore",
            dependencies: [
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                "StepCore",
                "StepDatabase",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "StepJobs",
            dependencies: [
                "StepTracing", .product(name: "Tracing", package: "swift-distributed-tracing"),
                "StepCore",
                "StepStore",
                "StepDatabase",
                "StepAttestation",
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "StepAttestation",
            dependencies: [
                "StepTracing", .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "StepSettings",
            dependencies: [
                "StepCore",
                "StepStore",
                "StepDatabase",
                "StepJobs",
                "StepAttestation",
                "StepLogging",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "StepAPI",
            dependencies: [
                "StepTracing", .product(name: "Tracing", package: "swift-distributed-tracing"),
                "StepLogging",
                "StepCore",
                "StepStore", "StepDatabase",
                "StepJobs",
                "StepAttestation",
                "StepSettings",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            ],
            // The console's readable sources and the API contract: scripts/embed-console-assets and
            // scripts/embed-openapi compile them in (ConsoleSources.swift, OpenAPIDocument.swift).
            exclude: ["Console/Assets", "Resources/openapi.yaml"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "stepd",
            dependencies: [
                "StepTracing", .product(name: "Tracing", package: "swift-distributed-tracing"),
                "StepLogging",
                "StepAPI",
                "StepSettings",
                "StepStore",
                "StepDatabase",
                "StepJobs",
                "StepCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "stepbench",
            dependencies: [
                "StepLogging",
                "StepAPI",
                "StepSettings",
                "StepAttestation",
                "StepCore",
                "StepStore",
                "StepDatabase",
                "StepJobs",
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // The client SDK: its wire layer generated from openapi.yaml (Generated/, scripts/generate-client), its
        // transport URLSession on Apple platforms and AsyncHTTPClient on Linux. It imports nothing of the server.
        .target(
            name: "StepLedgerClient",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(
                    name: "OpenAPIURLSession", package: "swift-openapi-urlsession",
                    condition: .when(platforms: [.macOS, .iOS, .tvOS, .watchOS, .visionOS])),
                .product(
                    name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client",
                    condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strict
        ),
        // The client from a shell (docs/client.md and scripts/client-crash-test).
        .executableTarget(
            name: "stepledger-client",
            dependencies: [
                "StepLedgerClient",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "StepLedgerClientTests",
            dependencies: [
                "StepLedgerClient",
                "StepTestSupport",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "StepTestSupport",
            dependencies: [
                "StepStore", "StepDatabase", "StepAttestation",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/StepTestSupport",
            swiftSettings: strict
        ),
        .testTarget(
            name: "StepCoreTests",
            dependencies: ["StepCore", "StepTestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "StepAttestationTests",
            dependencies: [
                "StepAttestation", "StepTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            exclude: ["Vectors"],
            swiftSettings: strict
        ),
        // The benchmark's arithmetic (percentiles, medians, CPU readings, the CPU bound), against the executable.
        .testTarget(
            name: "StepBenchTests",
            dependencies: [
                "stepbench", "StepCore", "StepStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "StepDatabaseTests",
            dependencies: [
                "StepDatabase", "StepStore", "StepTestSupport",
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "_ConnectionPoolModule", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "StepStoreTests",
            dependencies: [
                "StepStore", "StepDatabase", "StepCore", "StepTestSupport",
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "StepJobsTests",
            dependencies: [
                "StepJobs", "StepStore", "StepDatabase", "StepCore", "StepTestSupport",
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "StepSettingsTests",
            dependencies: [
                "StepSettings",
                "StepJobs",
                "StepDatabase",
                "StepCore",
                "StepStore",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "StepAPITests",
            dependencies: [
                "StepTracing",
                "StepLogging",
                "StepAPI",
                "StepSettings",
                "StepStore",
                "StepDatabase",
                "StepJobs",
                "StepCore",
                "StepAttestation",
                "StepTestSupport",
                "StepLedgerClient",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            exclude: ["Fixtures"],
            swiftSettings: strict
        ),
    ]
)
