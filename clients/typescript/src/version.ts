/**
 * The package's name and version, as `package.json` gives them (a test holds the two equal),
 * for the `User-Agent` every request carries. Kept here rather than read from `package.json`
 * at run time, so that no bundler (esbuild, Metro) has to import JSON.
 */

/** The package's name. */
export const PACKAGE_NAME = 'payments-client';

/** The package's version. */
export const PACKAGE_VERSION = '0.1.0';

/**
 * `name/version`, the product token of RFC 9110 §10.1.5, and a comment that tells this package
 * from the Rust client of the same name.
 */
export const USER_AGENT = `${PACKAGE_NAME}/${PACKAGE_VERSION} (TypeScript)`;
