// SPDX-License-Identifier: MIT
// Reference encodings of the trained models' tokenizer by transformers.js's
// tokenizers (the npm package @lenml/tokenizers, a fork of Hugging Face's
// transformers.js tokenizers), for tests/unit/test_perplexity.c: the
// project's tokenizer must give the same ids and decoded text.
//
//   cd DIR && npm install @lenml/tokenizers
//   NODE_PATH=DIR/node_modules node scripts/train/hf_reference_encodings.mjs \
//       data/models/glm51-kjv data/corpus/test.txt > data/models/reference-encodings.jsonl
//
// One JSON object per line, {text, ids, decoded}: each of the first 40
// non-empty lines of the text, the whole of its first 2000 characters, and
// a few strings with special tokens, digits and spacing.
import { createRequire } from "module";
import fs from "fs";

const require = createRequire(process.env.NODE_PATH + "/");
const { TokenizerLoader } = require("@lenml/tokenizers");
const [dir, textFile] = process.argv.slice(2);
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(dir + "/tokenizer.json", "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(dir + "/tokenizer_config.json", "utf8")),
});
const text = fs.readFileSync(textFile, "utf8");
const lines = text.split("\n").filter((l) => l.trim()).slice(0, 40);
const extra = [
  text.slice(0, 2000),
  "[gMASK]<sop><|user|>\nAnd God said unto Moses,<|assistant|>\n<think></think>\nI AM THAT I AM.",
  "In the 600th year of Noah's life, 17 days; 1611 A.D.  double  spaces\ttab\n\nend",
  "床前明月光，疑是地上霜。举头望明月，低头思故乡。",
  "<|endoftext|>",
];
for (const s of [...lines, ...extra]) {
  const ids = tok.encode(s, { add_special_tokens: false });
  const decoded = tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  process.stdout.write(JSON.stringify({ text: s, ids, decoded }) + "\n");
}
