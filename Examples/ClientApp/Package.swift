// swift-tools-version: 6.2
// A walking app's use of StepLedgerClient, as an app adds it: by the repository's URL and a version. Here the
// dependency is the checkout by path; scripts/client-app-check builds a copy that names a tagged clone of the
// repository by URL and version instead, so the check is what an app really does.
import PackageDescription

let package = Package(
    name: "ClientApp",
    platforms: [.macOS(.v12), .iOS(.v15)],
    dependencies: [
        .package(name: "StepLedger", path: "../..")
    ],
    targets: [
        .executableTarget(
            name: "ClientApp",
            dependencies: [.product(name: "StepLedgerClient", package: "StepLedger")]
        )
    ]
)
