// A Cloudflare Worker using the package as a Workers project does: bundled by wrangler for the
// `workerd` condition, so the engine is the WebAssembly build. It answers the scenario's result.
import * as kvlint from "kvlint-cache";

import { scenario } from "./scenario.mjs";

export default {
  async fetch() {
    return Response.json(scenario(kvlint));
  },
};
