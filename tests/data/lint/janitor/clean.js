/* purpose-built book for lorescan lint: clean */
var APPLY_LIMIT = 6;
var dynamicLore = [
  { keywords: ['harbor', 'pier*'], priority: 4, scenario: 'The harbor.', triggers: ['gull'] },
  { keywords: ['lighthouse'], requireAny: ['night', 'fog'], personality: 'She keeps the light.' },
  { tag: 'gull', scenario: 'Gulls wheel overhead.' },
];
