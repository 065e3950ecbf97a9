/* purpose-built book for lorescan lint: ls831 */
var APPLY_LIMIT = 6;
var dynamicLore = [
  { keywords: ['harbor', 'pier*'], priority: 4, scenario: 'The harbor.', triggers: ['gull'] },
  { tag: 'ghost', scenario: 'A ghost.' },
  { tag: 'gull', scenario: 'Gulls wheel overhead.' },
];
