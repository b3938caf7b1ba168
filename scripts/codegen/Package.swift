// swift-tools-version: 6.2
// Builds the pinned swift-openapi-generator command, which scripts/generate-client runs to write the client's
// wire layer (Sources/StepLedgerClient/Generated) from Sources/StepAPI/Resources/openapi.yaml.
import PackageDescription

let package = Package(
    name: "StepLedgerCodegen",
    dependencies: [
        .package(url: "https://github.com/apple/swift-openapi-generator", exact: "1.14.3")
    ],
    targets: []
)
