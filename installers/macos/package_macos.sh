#!/usr/bin/env bash
# Make the macOS disk image from the built app: DIST/Hearth-<version>-macos-<arch>.dmg, holding
# Hearth.app and a link to /Applications to drag it onto.
#
#   bash installers/macos/package_macos.sh [DIST]        (DIST defaults to dist)
#
# Run on a Mac after `python installers/build_bundle.py --dist DIST`. The version is the one the
# spec wrote into Hearth.app's Info.plist. Signing and notarisation happen only when their secrets
# are in the environment (installers/SIGNING.md); nothing secret is in the repository:
#   HEARTH_MACOS_CERT_P12_BASE64  Developer ID Application certificate and key, a .p12, base64-encoded
#   HEARTH_MACOS_CERT_PASSWORD    that .p12's password
#   HEARTH_MACOS_SIGN_IDENTITY    the identity, e.g. "Developer ID Application: Name (TEAMID)"
#   HEARTH_NOTARY_KEY_P8_BASE64   an App Store Connect API key (.p8), base64-encoded
#   HEARTH_NOTARY_KEY_ID          that key's id
#   HEARTH_NOTARY_ISSUER_ID       its issuer id
# Without a certificate the image is made unsigned and one line says "unsigned".
# Written for the bash 3.2 that macOS ships (no mapfile, no associative arrays).
set -euo pipefail
cd "$(dirname "$0")/../.."

dist="${1:-dist}"
app="$dist/Hearth.app"
entitlements="installers/macos/entitlements.plist"
work=$(mktemp -d)
keychain="$work/hearth-signing.keychain-db"

cleanup() {
  if [[ -f "$keychain" ]]; then
    security list-keychains -d user -s "$HOME/Library/Keychains/login.keychain-db" || true
    security delete-keychain "$keychain" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# The certificate goes into a throwaway keychain that only codesign may use, deleted on exit.
import_certificate() {
  local password
  password=$(uuidgen)
  printf '%s' "$HEARTH_MACOS_CERT_P12_BASE64" | base64 --decode > "$work/certificate.p12"
  security create-keychain -p "$password" "$keychain"
  security set-keychain-settings -lut 3600 "$keychain"
  security unlock-keychain -p "$password" "$keychain"
  security import "$work/certificate.p12" -k "$keychain" -P "$HEARTH_MACOS_CERT_PASSWORD" -T /usr/bin/codesign
  security set-key-partition-list -S apple-tool:,apple:,codesign: -s -k "$password" "$keychain" > /dev/null
  security list-keychains -d user -s "$keychain" "$HOME/Library/Keychains/login.keychain-db"
  rm -f "$work/certificate.p12"
}

sign() {  # sign FILE [codesign options...], with a secure time-stamp
  local file="$1"
  shift
  codesign --force --timestamp --keychain "$keychain" --sign "$HEARTH_MACOS_SIGN_IDENTITY" "$@" "$file"
}

# Inside out, all with the hardened runtime that notarisation requires: every Mach-O library, then
# the frameworks as bundles, then the executables with the entitlements (entitlements belong to
# executables only), then the app itself.
sign_app() {
  local file
  while IFS= read -r -d '' file; do
    if file -b "$file" | grep -q 'Mach-O'; then
      sign "$file" --options runtime
    fi
  done < <(find "$app/Contents" -type f ! -path "$app/Contents/MacOS/*" -print0)
  while IFS= read -r -d '' file; do
    sign "$file" --options runtime
  done < <(find "$app/Contents" -depth -type d -name '*.framework' -print0)
  while IFS= read -r -d '' file; do
    sign "$file" --options runtime --entitlements "$entitlements"
  done < <(find "$app/Contents/MacOS" -type f -perm -u+x -print0)
  sign "$app" --options runtime --entitlements "$entitlements"
  codesign --verify --deep --strict --verbose=1 "$app"
}

make_dmg() {
  local stage="$work/dmg"
  mkdir -p "$stage"
  ditto "$app" "$stage/Hearth.app"  # keeps symlinks, extended attributes and signatures
  ln -s /Applications "$stage/Applications"
  rm -f "$dmg"
  hdiutil create -volname Hearth -srcfolder "$stage" -format UDZO -ov "$dmg" > /dev/null
}

# notarytool exits 0 on any verdict, so the verdict itself is checked; Apple's log explains a refusal.
notarize() {
  local key="$work/notary-key.p8" result="$work/notary.json" status id
  printf '%s' "$HEARTH_NOTARY_KEY_P8_BASE64" | base64 --decode > "$key"
  local credentials=(--key "$key" --key-id "$HEARTH_NOTARY_KEY_ID" --issuer "$HEARTH_NOTARY_ISSUER_ID")
  xcrun notarytool submit "$dmg" "${credentials[@]}" --wait --output-format json > "$result"
  status=$(plutil -extract status raw -o - "$result")
  if [[ "$status" != "Accepted" ]]; then
    id=$(plutil -extract id raw -o - "$result" || echo unknown)
    xcrun notarytool log "$id" "${credentials[@]}" >&2 || true
    echo "notarisation refused ($status, submission $id)" >&2
    exit 1
  fi
  xcrun stapler staple "$dmg"
}

if [[ ! -d "$app" ]]; then
  echo "no $app: run python installers/build_bundle.py --dist $dist first" >&2
  exit 1
fi
version=$(plutil -extract CFBundleShortVersionString raw -o - "$app/Contents/Info.plist")
dmg="$dist/Hearth-$version-macos-$(uname -m).dmg"

if [[ -z "${HEARTH_MACOS_CERT_P12_BASE64:-}" ]]; then
  echo "unsigned: HEARTH_MACOS_CERT_P12_BASE64 is not set"
  make_dmg
else
  import_certificate
  sign_app
  make_dmg
  sign "$dmg"
  if [[ -n "${HEARTH_NOTARY_KEY_P8_BASE64:-}" ]]; then
    notarize
  else
    echo "signed but not notarised: HEARTH_NOTARY_KEY_P8_BASE64 is not set"
  fi
fi
echo "$dmg"
