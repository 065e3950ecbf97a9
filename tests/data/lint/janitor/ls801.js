/* purpose-built book for lorescan lint: ls801 */
var APPLY_LIMIT = 6;
var dynamicLore = [
  { keywords: ['harbor', 'pier*'], priority: 4, scenario: 'The harbor.', triggers: ['gull'] },
  { keywords: ['café', 'bistro'], scenario: 'A café.' },
  { tag: 'gull', scenario: 'Gulls wheel overhead.' },
];
